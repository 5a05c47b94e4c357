//! The reservations a source secured on a target and never brought to it (spec 21 §9.1
//! "Source terminates during Preparing or capture: confirms the current source owner, then
//! cancels the move"): a source that ended between securing the target capacity and its
//! Restore reaching the target leaves a reservation row no process holds a copy of. The
//! recovery sweep leaves a row whose target is live to that target (it may still finish the
//! move), so the target finds such rows here, from one scan of the reservation rows, and
//! releases them.

use super::super::super::error::LocationError;
use super::super::super::identity::HostRun;
use super::super::super::keys::PrivateFamily;
use super::super::super::placement::TargetNode;
use super::super::AuthorityClient;
use super::super::rows::ReservationRow;
use super::TargetReservation;

impl AuthorityClient {
    /// The relocation target reservations `source` secured on `target`, as their rows are
    /// stored now (one snapshot of the reservation rows; a row that cannot be read or decoded
    /// is logged and left out). Each copy expects the record version its row was secured at:
    /// use it to release ([`release_target`](Self::release_target), conditioned on the row's
    /// version as read), not for an owner change.
    pub async fn reservations_from(
        &self,
        source: &HostRun,
        target: &TargetNode,
    ) -> Result<Vec<TargetReservation>, LocationError> {
        let listing = self
            .scan_all(&PrivateFamily::CapacityReservation.prefix())
            .await?;
        let mut found = Vec::new();
        for item in listing.items {
            let row = match ReservationRow::decode(&item.bytes) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(key = %item.key, error = %e, "reservation scan skips an undecodable row");
                    continue;
                }
            };
            if &row.source != source || row.target != target.run || row.target_node != target.node {
                continue;
            }
            found.push(TargetReservation {
                key: item.key,
                expects: row.secured_at.clone(),
                version: item.version,
                target: target.clone(),
                row,
            });
        }
        Ok(found)
    }
}
