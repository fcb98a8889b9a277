//! Goal: every node's `/metrics` is valid Prometheus text with the series an operator
//! needs, and the figures agree across nodes. Method: a 3-node process fabric with
//! `--http`, a lease and some writes through the CLI and a client, then each node's scrape
//! read by `prometheus-parse` (every line must parse) and checked cell by cell.

use std::collections::BTreeMap;

use prometheus_parse::{LineInfo, Sample, Scrape, Value};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_tests::browser::get;

use crate::{args, observed_fabric, whip};

const CELLS: u64 = 4;

/// Parse one scrape; panics on any line the parser does not take.
fn scrape(http: &str) -> Scrape {
    let (status, text) = get(http, "/metrics");
    assert_eq!(status, 200, "{text}");
    for line in text.lines() {
        let ignored = matches!(LineInfo::parse(line), LineInfo::Ignored);
        assert!(
            !ignored || line == "# EOF",
            "{http}: unparsed line {line:?}"
        );
    }
    assert!(
        text.ends_with("# EOF\n"),
        "an OpenMetrics scrape ends with # EOF"
    );
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parse metrics")
}

fn value(sample: &Sample) -> f64 {
    match &sample.value {
        Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => *v,
        other => panic!("{} is not a number: {other:?}", sample.metric),
    }
}

/// `metric{cell=…}` of one scrape, by cell.
fn per_cell(s: &Scrape, metric: &str) -> BTreeMap<u64, f64> {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .map(|x| {
            (
                x.labels
                    .get("cell")
                    .expect("cell label")
                    .parse()
                    .expect("cell id"),
                value(x),
            )
        })
        .collect()
}

fn total(s: &Scrape, metric: &str) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == metric)
        .map(value)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_parse_and_agree_across_nodes() {
    let fabric = observed_fabric(CELLS as u32).await;
    let acquire = args(&[
        "lease",
        "acquire",
        "--singleton",
        "metrics-test",
        "--holder",
        "a",
        "--ttl",
        "60s",
        "--cell",
        &fabric.addrs[1],
        "--json",
    ]);
    let (ok, held, err) = whip(&acquire);
    assert!(ok && held["outcome"] == "held", "{held} {err}");
    let client = CellClient::connect(&fabric.addrs).expect("client");
    for i in 0..20 {
        let put = pb::KvPutRequest {
            key: format!("metrics-{i}").into_bytes(),
            value: b"v".to_vec(),
            expect_version: None,
            idempotency_key: String::new(),
        };
        client.kv_put(put).await.expect("put");
    }
    let scrapes: Vec<Scrape> = fabric.http_addrs.iter().map(|h| scrape(h)).collect();
    for cell in 0..=CELLS {
        let leaders: Vec<f64> = scrapes
            .iter()
            .map(|s| per_cell(s, "whip_cell_leader")[&cell])
            .collect();
        assert!(
            leaders[0] >= 1.0 && leaders.iter().all(|l| *l == leaders[0]),
            "{leaders:?}"
        );
        let leading: f64 = scrapes
            .iter()
            .map(|s| per_cell(s, "whip_cell_is_leader")[&cell])
            .sum();
        assert_eq!(leading, 1.0, "cell {cell} has one leader");
        for s in &scrapes {
            assert!(per_cell(s, "whip_cell_term")[&cell] >= 1.0);
            let applied = per_cell(s, "whip_cell_applied_index")[&cell];
            assert!(applied >= 1.0 && applied <= per_cell(s, "whip_cell_last_log_index")[&cell]);
        }
        let commit: Vec<f64> = scrapes
            .iter()
            .filter_map(|s| per_cell(s, "whip_cell_commit_index").get(&cell).copied())
            .collect();
        assert_eq!(
            commit.len(),
            1,
            "only the leader reports cell {cell}'s commit index"
        );
    }
    for s in &scrapes {
        let ceiling = per_cell(s, "whip_work_ceiling");
        assert!(ceiling.values().all(|c| *c == 10_000.0), "{ceiling:?}");
        let cell_tier = s
            .samples
            .iter()
            .filter(|x| x.metric == "whip_board_tasks" && x.labels.get("tier") == Some("cell"));
        assert_eq!(
            cell_tier.count(),
            3 * per_cell(s, "whip_work_ceiling").len()
        );
        assert_eq!(
            per_cell(s, "whip_cell_term").len(),
            CELLS as usize + 1,
            "one per member"
        );
    }
    let held: f64 = scrapes.iter().map(|s| total(s, "whip_leases_held")).sum();
    assert_eq!(held, 1.0, "the singleton lease is held once in the fabric");
    let appends = scrapes.iter().flat_map(|s| &s.samples).filter(|x| {
        x.metric == "whip_rpc_calls_total"
            && x.labels.get("method") == Some("/whip.v1.Raft/AppendEntries")
            && x.labels.get("code") == Some("ok")
    });
    assert!(
        appends.map(value).sum::<f64>() > 0.0,
        "Raft traffic is counted"
    );
    let replied = scrapes.iter().flat_map(|s| &s.samples).find_map(|x| {
        let stage =
            x.metric == "whip_cell_write_stage_seconds" && x.labels.get("stage") == Some("replied");
        match (&x.value, stage) {
            (Value::Histogram(buckets), true) => buckets.last().map(|b| b.count),
            _ => None,
        }
    });
    assert!(
        replied.is_some_and(|n| n >= 1.0),
        "the writes' stages are exported: {replied:?}"
    );
}
