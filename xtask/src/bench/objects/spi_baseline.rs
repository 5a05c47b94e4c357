//! The SPI baseline of the create figure: one creation's Store work written straight
//! through the SPI.

use super::*;

/// The Store work of one creation, shaped like the runtime's batches, through the SPI: a
/// reserve (a Missing condition on a fresh record key, version conditions on two leases, two
/// generation counters and an allocation row; puts of the record, its lookup index, the
/// counters and the row) and a commit (version conditions on the record and a lease; a put of
/// the record), and exact reads of a record.
pub(super) struct SpiBaseline {
    store: Arc<dyn DynLocationStore>,
    leases: [StoreKey; 2],
    /// Two counters and the allocation row, with their current versions.
    shared: Vec<(StoreKey, StoreVersion)>,
    lease_versions: [StoreVersion; 2],
    fresh: u64,
    read_key: StoreKey,
}

fn key(s: &str) -> Result<StoreKey, String> {
    StoreKey::new(s).map_err(to_string)
}

fn bytes(n: usize) -> Bytes {
    Bytes::from(vec![b'7'; n])
}

fn applied(result: WriteResult, what: &str) -> Result<Vec<StoreVersion>, String> {
    match result {
        WriteResult::Applied { put_versions, .. } => Ok(put_versions),
        WriteResult::Conflict { .. } => Err(format!("the baseline {what} conflicted")),
    }
}

impl SpiBaseline {
    pub(super) async fn seed(store: Arc<dyn DynLocationStore>) -> Result<Self, String> {
        let leases = [key("bench/lease/a")?, key("bench/lease/b")?];
        let shared_keys = [
            key("bench/counter/object")?,
            key("bench/counter/owner")?,
            key("bench/row/b")?,
        ];
        let read_key = key("bench/read")?;
        let retention = Retention::new(Duration::from_secs(600)).map_err(to_string)?;
        let mut muts: Vec<Mutation> = leases
            .iter()
            .map(|k| Mutation::put_expiring(k.clone(), bytes(LEASE_LEN), retention))
            .collect();
        muts.extend(
            shared_keys
                .iter()
                .zip([COUNTER_LEN, COUNTER_LEN, ROW_LEN])
                .map(|(k, n)| Mutation::put(k.clone(), bytes(n))),
        );
        muts.push(Mutation::put(read_key.clone(), bytes(RECORD_LEN)));
        let request = WriteRequest::new(vec![], muts).map_err(to_string)?;
        let versions = applied(store.write_dyn(&request).await.map_err(to_string)?, "seed")?;
        let [l0, l1, c0, c1, row, _read] = <[StoreVersion; 6]>::try_from(versions)
            .map_err(|_| "the seed batch returned the wrong number of versions")?;
        let shared = shared_keys.into_iter().zip([c0, c1, row]).collect();
        Ok(Self {
            store,
            leases,
            shared,
            lease_versions: [l0, l1],
            fresh: 0,
            read_key,
        })
    }

    /// Reserve then commit of fresh records, one after another, for `d`: each batch's latency.
    pub(super) async fn batches(
        &mut self,
        d: Duration,
    ) -> Result<((Vec<Duration>, Duration), (Vec<Duration>, Duration)), String> {
        let (mut reserve, mut commit) = (Vec::new(), Vec::new());
        let started = Instant::now();
        let shared = &mut self.shared;
        while started.elapsed() < d {
            self.fresh += 1;
            let n = self.fresh;
            let record = key(&format!("bench/record/{n:012}"))?;
            let index = key(&format!("bench/index/{n:012}"))?;
            let mut conditions = vec![Condition::Missing(record.clone())];
            conditions.extend(
                self.leases
                    .iter()
                    .zip(&self.lease_versions)
                    .map(|(k, v)| Condition::Version(k.clone(), v.clone())),
            );
            conditions.extend(
                shared
                    .iter()
                    .map(|(k, v)| Condition::Version(k.clone(), v.clone())),
            );
            let mut muts = vec![
                Mutation::put(record.clone(), bytes(RECORD_LEN)),
                Mutation::put(index, bytes(INDEX_LEN)),
            ];
            muts.extend(
                shared
                    .iter()
                    .zip([COUNTER_LEN, COUNTER_LEN, ROW_LEN])
                    .map(|((k, _), len)| Mutation::put(k.clone(), bytes(len))),
            );
            let request = WriteRequest::new(conditions, muts).map_err(to_string)?;
            let t = Instant::now();
            let result = self.store.write_dyn(&request).await.map_err(to_string)?;
            reserve.push(t.elapsed());
            let versions = applied(result, "reserve")?;
            let [record_version, _index, c0, c1, row] = <[StoreVersion; 5]>::try_from(versions)
                .map_err(|_| "the reserve batch returned the wrong number of versions")?;
            for ((_, v), new) in shared.iter_mut().zip([c0, c1, row]) {
                *v = new;
            }
            let request = WriteRequest::new(
                vec![
                    Condition::Version(record.clone(), record_version),
                    Condition::Version(self.leases[1].clone(), self.lease_versions[1].clone()),
                ],
                vec![Mutation::put(record, bytes(RECORD_LEN))],
            )
            .map_err(to_string)?;
            let t = Instant::now();
            let result = self.store.write_dyn(&request).await.map_err(to_string)?;
            commit.push(t.elapsed());
            applied(result, "commit")?;
        }
        let elapsed = started.elapsed();
        Ok(((reserve, elapsed), (commit, elapsed)))
    }

    /// Exact reads of a record for `d`.
    pub(super) async fn reads(&self, d: Duration) -> Result<(Vec<Duration>, Duration), String> {
        let mut samples = Vec::new();
        let started = Instant::now();
        while started.elapsed() < d {
            let t = Instant::now();
            let read = self
                .store
                .read_dyn(&self.read_key)
                .await
                .map_err(to_string)?;
            samples.push(t.elapsed());
            if let ReadResult::Missing { .. } = read {
                return Err("the baseline record is missing".into());
            }
        }
        Ok((samples, started.elapsed()))
    }
}
