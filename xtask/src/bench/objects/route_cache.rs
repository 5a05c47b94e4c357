//! Figure 4: the route cache against a plain `HashMap`.

use super::*;

/// Figure 4: route-cache hits against a plain `HashMap` of the same `keys` entries, same keys
/// in the same order, on this thread. The value is a RoutingId of the default form
/// (`node-` and a UUID).
pub(super) fn route_cache(keys: usize, d: Duration) -> Result<(), String> {
    let node =
        RoutingId::new(format!("node-{}", uuid::Uuid::new_v4()).into_bytes()).map_err(to_string)?;
    let node = &node;
    let ids: Vec<ObjectId> = (0..keys)
        .map(|i| ObjectId::new(format!("bench.remote-{i}")).map_err(to_string))
        .collect::<Result<_, _>>()?;
    let cache = RouteCacheBench::new(Duration::from_secs(3600));
    let mut map: HashMap<ObjectId, RoutingId> = HashMap::new();
    for id in &ids {
        cache.insert(id, node);
        map.insert(id.clone(), node.clone());
    }
    // One pseudo-random visiting order, shared by both sides.
    let mut order = Vec::with_capacity(ids.len());
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..ids.len() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.push(&ids[(x % ids.len() as u64) as usize]);
    }
    let slice = d / ROUNDS;
    let (mut hits_cache, mut t_cache, mut hits_map, mut t_map) =
        (0u64, Duration::ZERO, 0u64, Duration::ZERO);
    let mut paired = Vec::new();
    for _ in 0..ROUNDS {
        let (mut n_cache, mut n_map) = (0u64, 0u64);
        let started = Instant::now();
        while started.elapsed() < slice {
            for id in &order {
                if black_box(cache.get(black_box(id))).is_some() {
                    n_cache += 1;
                }
            }
        }
        let e_cache = started.elapsed();
        let started = Instant::now();
        while started.elapsed() < slice {
            for id in &order {
                if black_box(map.get(black_box(*id))).is_some() {
                    n_map += 1;
                }
            }
        }
        let e_map = started.elapsed();
        paired
            .push((n_cache as f64 / e_cache.as_secs_f64()) / (n_map as f64 / e_map.as_secs_f64()));
        (hits_cache, t_cache, hits_map, t_map) = (
            hits_cache + n_cache,
            t_cache + e_cache,
            hits_map + n_map,
            t_map + e_map,
        );
    }
    let per_sec = |n: u64, t: Duration| n as f64 / t.as_secs_f64();
    let (c, m) = (per_sec(hits_cache, t_cache), per_sec(hits_map, t_map));
    println!(
        "4. route-cache hit resolve, one thread, {keys} keys in a shuffled order (no root running):"
    );
    println!(
        "   {:<34} {c:>12.0} /s   {:>6.1} ns each",
        "RouteCache::get (hit)",
        1e9 / c
    );
    println!(
        "   {:<34} {m:>12.0} /s   {:>6.1} ns each",
        "HashMap::get",
        1e9 / m
    );
    println!(
        "   route cache / HashMap throughput = {:.2}x over all rounds, {:.2}x median of the \
         {ROUNDS} paired rounds (target >= 0.3x)",
        c / m,
        median(paired)
    );
    Ok(())
}
