//! Goal: every node's `/metrics` is valid Prometheus text with the series an operator
//! needs, and the figures agree across nodes. Method: a 3-node process fabric with
//! `--http`, a lease and some writes through the CLI and a client, then each node's scrape
//! read by `prometheus-parse` (every line must parse) and checked cell by cell.

use std::collections::BTreeMap;

use prometheus_parse::{LineInfo, Sample, Scrape, Value};
use whip_cell::CellClient;
use whip_proto::v1 as pb;
use whip_tests::browser::get;
use whip_tests::fabric::ProcessFabric;

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

/// A singleton lease through the CLI and some writes through a client.
async fn write_some(fabric: &ProcessFabric) {
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
            ..Default::default()
        };
        client.kv_put(put).await.expect("put");
    }
}

/// Every node reports every cell, and they agree on its one leader.
fn check_cells(scrapes: &[Scrape]) {
    for cell in 0..=CELLS {
        let of = |metric: &str| -> Vec<Option<f64>> {
            scrapes
                .iter()
                .map(|s| per_cell(s, metric).get(&cell).copied())
                .collect()
        };
        let leaders = of("whip_cell_leader");
        assert!(
            leaders[0].is_some_and(|l| l >= 1.0) && leaders.iter().all(|l| *l == leaders[0]),
            "cell {cell}: {leaders:?}"
        );
        let leading: f64 = of("whip_cell_is_leader").into_iter().flatten().sum();
        assert_eq!(leading, 1.0, "cell {cell} has one leader");
        let commit = of("whip_cell_commit_index").into_iter().flatten().count();
        assert_eq!(
            commit, 1,
            "only the leader reports cell {cell}'s commit index"
        );
        for (applied, last) in of("whip_cell_applied_index")
            .into_iter()
            .zip(of("whip_cell_last_log_index"))
        {
            let (applied, last) = (applied.expect("applied"), last.expect("last log"));
            assert!(
                applied >= 1.0 && applied <= last,
                "cell {cell}: {applied} of {last}"
            );
        }
        assert!(
            of("whip_cell_term")
                .iter()
                .all(|t| t.is_some_and(|t| t >= 1.0))
        );
    }
}

/// The leaders' gauges: the registry's ceiling, the cell tier's depths, the lease.
fn check_gauges(scrapes: &[Scrape]) {
    for s in scrapes {
        let ceiling = per_cell(s, "whip_work_ceiling");
        assert!(ceiling.values().all(|c| *c == 10_000.0), "{ceiling:?}");
        let cell_tier = s
            .samples
            .iter()
            .filter(|x| x.metric == "whip_board_tasks" && x.labels.get("tier") == Some("cell"));
        assert_eq!(
            cell_tier.count(),
            3 * ceiling.len(),
            "ready, claimed, dead per cell led"
        );
        assert_eq!(
            per_cell(s, "whip_cell_term").len(),
            CELLS as usize + 1,
            "one per member"
        );
    }
    let held: f64 = scrapes.iter().map(|s| total(s, "whip_leases_held")).sum();
    assert_eq!(held, 1.0, "the singleton lease is held once in the fabric");
}

/// RPC counts by method and code, and the writes' stage histograms.
fn check_rpc_and_stages(scrapes: &[Scrape]) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_parse_and_agree_across_nodes() {
    let fabric = observed_fabric(CELLS as u32).await;
    write_some(&fabric).await;
    let scrapes: Vec<Scrape> = fabric.http_addrs.iter().map(|h| scrape(h)).collect();
    check_cells(&scrapes);
    check_gauges(&scrapes);
    check_rpc_and_stages(&scrapes);
}
