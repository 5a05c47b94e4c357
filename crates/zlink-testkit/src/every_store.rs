//! [`on_every_store!`](crate::on_every_store): one behaviour function, one test per backend.

/// Turns each behaviour function `async fn name(h: &Harness)` into three tests, one per
/// backend: `memory::name`, `redis::name` (`ZLINK_TEST_REDIS_URL`) and `cluster::name`
/// (`ZLINK_TEST_REDIS_CLUSTER`). A live backend whose variable is missing skips loudly, and
/// fails when `CI` or `ZLINK_REQUIRE_REDIS` is set (see [`Harness::redis`](crate::Harness::redis)).
///
/// Name the functions either plainly (`on_every_store!(a, b)`, functions in the invoking
/// module) or by area (`on_every_store!(area::a, other::b)`, functions in child modules). The
/// invoking crate needs `tokio` with the `macros` and `rt-multi-thread` features.
#[macro_export]
macro_rules! on_every_store {
    (@emit $($name:ident => $($f:ident)::+),+) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let h = $crate::Harness::memory();
                    super::$($f)::+(&h).await;
                }
            )+
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(h) = $crate::Harness::redis(stringify!($name)).await else {
                        return;
                    };
                    super::$($f)::+(&h).await;
                }
            )+
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(h) = $crate::Harness::cluster(stringify!($name)).await else {
                        return;
                    };
                    super::$($f)::+(&h).await;
                }
            )+
        }
    };
    ($($area:ident :: $name:ident),+ $(,)?) => {
        $crate::on_every_store!(@emit $($name => $area::$name),+);
    };
    ($($name:ident),+ $(,)?) => {
        $crate::on_every_store!(@emit $($name => $name),+);
    };
}
