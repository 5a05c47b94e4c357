//! What the verification of acknowledged writes costs (`docs/store-epoch.md`): Reserve+Commit
//! pairs on a host that checks, after each owner-lease renew, every authority row it wrote
//! (the default) beside a host that does not, in the same run, rounds alternating. Both renew
//! every second (so each round holds several verification rounds), and each figure is the
//! median of the rounds, with the exact reads and the other writes (renewals, and the
//! verification's checks: conditional batches without a mutation) per pair the counting
//! wrapper saw.

use std::sync::Arc;
use std::time::Duration;

use zlink_location::{LocationOptions, LocationRuntime};
use zlink_store_spi::DynLocationStore;

use super::counted::Counted;
use super::{CONCURRENCY, measure_for, median, object, reserve_commit, target_of};

fn options(verify: bool) -> LocationOptions {
    // 1 + 1 < 15 - 5.
    LocationOptions::default()
        .owner_lease_renew_interval(Duration::from_secs(1))
        .owner_lease_renew_timeout(Duration::from_secs(1))
        .verify_acknowledged_writes(verify)
}

/// One round: pairs per second, exact reads and other writes per pair.
async fn round(
    rt: &Arc<LocationRuntime>,
    rid: u8,
    counted: &Counted,
    concurrency: usize,
    seconds: f64,
    tag: String,
) -> Result<(f64, f64, f64), String> {
    let target = Arc::new(target_of(rt, rid)?);
    let before = counted.counts();
    let rt = rt.clone();
    let (pairs, secs) = measure_for(concurrency, seconds, move |i| {
        let (rt, target, tag) = (rt.clone(), target.clone(), tag.clone());
        async move {
            reserve_commit(&rt, &target, object(&tag, i)?).await?;
            Ok(())
        }
    })
    .await?;
    // Let the verification of the round's last interval run inside the count.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let work = counted.counts().since(&before);
    let p = pairs.max(1) as f64;
    Ok((
        pairs as f64 / secs,
        work.reads as f64 / p,
        work.other_writes as f64 / p,
    ))
}

pub(super) async fn run(
    store: Arc<dyn DynLocationStore>,
    counted: &Counted,
    seconds: f64,
    rounds: usize,
) -> Result<(), String> {
    let start = |verify: bool| {
        let store = store.clone();
        async move {
            LocationRuntime::builder(store)
                .options(options(verify))
                .start()
                .await
                .map(Arc::new)
                .map_err(|e| e.to_string())
        }
    };
    let on = start(true).await?;
    let off = start(false).await?;
    println!(
        "\nwrite verification: Reserve+Commit pairs reading back each renew interval's writes vs not (renew every 1 s); median of {rounds} rounds of {seconds}s"
    );
    println!(
        "{:>3} | {:>10} {:>10} {:>6} | {:>10} {:>10} | {:>10} {:>10}",
        "c", "on p/s", "off p/s", "ratio", "reads/p on", "reads/p off", "other w/p on", "off"
    );
    for c in CONCURRENCY {
        let (mut won, mut woff) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            won.push(round(&on, 3, counted, c, seconds, format!("von{c}-{r}")).await?);
            woff.push(round(&off, 4, counted, c, seconds, format!("voff{c}-{r}")).await?);
        }
        let pps_on = median(won.iter().map(|x| x.0).collect());
        let pps_off = median(woff.iter().map(|x| x.0).collect());
        println!(
            "{:>3} | {:>10.0} {:>10.0} {:>5.2}x | {:>10.3} {:>10.3} | {:>10.4} {:>10.4}",
            c,
            pps_on,
            pps_off,
            pps_on / pps_off,
            median(won.iter().map(|x| x.1).collect()),
            median(woff.iter().map(|x| x.1).collect()),
            median(won.iter().map(|x| x.2).collect()),
            median(woff.iter().map(|x| x.2).collect()),
        );
    }
    Ok(())
}
