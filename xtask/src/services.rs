//! Starting (or reusing) the Redis services the tests need.
