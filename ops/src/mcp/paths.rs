//! `reserve_paths` and `release_paths`: path reservations of a repository for the proven
//! agent. Grants, conflicts, fences and who may release are the board's decisions
//! (`whip_board::reservation`); a whole-call refusal (`stale_fence`, `not_holder`,
//! `repo_full`) is a tool error with its code.

use serde_json::Value;
use whip_proto::v1 as pb;
use whip_proto::v1::OutcomeCode as Code;

use super::Agent;
use super::answer::{Answer, Refusal, seconds_ms};
use super::params::{ReleasePaths, ReservePaths};
use crate::paths::{reservation_json, response_json};

fn answered(r: &pb::PathsResponse) -> Answer {
    if r.code() == Code::PathsRefused {
        return Err(Refusal::answered(&r.refusal, &r.message));
    }
    let mut value = response_json(r);
    if let Some(object) = value.as_object_mut() {
        object.remove("outcome");
    }
    Ok(value)
}

impl Agent {
    pub(super) async fn reserve_paths(&self, p: ReservePaths) -> Answer {
        let request = pb::PathsReserveRequest {
            repo: p.repo,
            paths: p.paths,
            exclusive: p.exclusive,
            ttl_ms: seconds_ms("ttl_s", p.ttl_s)?,
            fence: p.fence,
            idempotency_key: String::new(),
        };
        answered(&self.client.paths_reserve(request).await?)
    }

    pub(super) async fn release_paths(&self, p: ReleasePaths) -> Answer {
        let request = pb::PathsReleaseRequest {
            repo: p.repo,
            paths: p.paths.unwrap_or_default(),
            fence: p.fence,
            idempotency_key: String::new(),
        };
        answered(&self.client.paths_release(request).await?)
    }

    /// The caller's own reservations in every repository, at most `max`.
    pub(super) async fn reservations_held(&self, max: usize) -> Result<Vec<Value>, Refusal> {
        let request = pb::PathsListRequest {
            repo: String::new(),
            mine: true,
            limit: u32::try_from(max).unwrap_or(u32::MAX),
        };
        let rows = self.client.paths_list(request).await?.reservations;
        Ok(rows
            .iter()
            .take(max)
            .map(|r| {
                let mut value = reservation_json(r);
                value["kind"] = "reservation".into();
                value
            })
            .collect())
    }
}
