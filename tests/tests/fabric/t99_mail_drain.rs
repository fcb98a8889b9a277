//! A drain failure never fails the run. Five nodes, four cells of three voters each, so two
//! cells two apart share one node: an instance whose state lives on one of them and whose
//! mailbox (its registry entry's cell) lives on the other loses its mailbox, and only its
//! mailbox, when the two nodes the mailbox cell does not share are killed. The instance
//! steps on (the failure is recorded as `mail.drain_failed`), and once the nodes are back
//! the message that waited is admitted, once, and completes the instance.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use whip_board::route;
use whip_cell::CellClient;
use whip_engine::runtime::EventKind;
use whip_engine::runtime::state::Status;
use whip_engine::runtime::{Engine, Program};
use whip_tests::fabric::Fabric;

const LISTEN: &str = "use std.messaging\n\nworkflow Hold\n\noutput result { text string }\n\n\
                      channel inbox { provider fabric }\n\n\
                      rule hear when message from inbox as m => {\n  \
                      complete result { text m.text }\n}\n";

/// An instance whose state cell and mailbox cell are two apart; with the two cells.
async fn placed_instance(
    fabric: &Fabric,
    engine: &Engine<CellClient>,
    program: &Arc<Program>,
) -> (String, u64, u64) {
    let map = fabric.node(5).map().await.expect("map");
    for _ in 0..64 {
        let id = engine
            .start(program, None, serde_json::Value::Null, None, None)
            .await
            .expect("start");
        let st = engine.load(&id).await.expect("load").state;
        let work = st.header.work.clone().expect("a registry entry");
        let mailbox = map
            .locate(route::work_point(whip_board::work::root_of(&work)))
            .cell;
        let state = map.locate(route::point(id.as_bytes())).cell;
        if mailbox.abs_diff(state) == 2 {
            return (id, state, mailbox);
        }
    }
    panic!("no instance landed two cells from its mailbox");
}

/// Wait until the mailbox cell of instance `id` no longer answers a read: its surviving
/// member may still lead under its read lease (the election timeout less a drift margin,
/// `cell/src/lease_read.rs`) right after its peers die; the outage begins once it cannot.
async fn mailbox_stops_answering(fabric: &Fabric, engine: &Engine<CellClient>, id: &str) {
    let work = engine
        .load(id)
        .await
        .unwrap()
        .state
        .header
        .work
        .expect("an entry");
    let reader = fabric.client_of_all();
    let what = "the mailbox cell to stop answering";
    whip_tests::wait_for(what, Duration::from_secs(20), || {
        let (reader, address) = (&reader, whip_fabric::mail::Address::Entry(work.clone()));
        async move {
            let read = whip_fabric::FabricClient::mail_inbox(reader, address, 0, 1);
            let answered = tokio::time::timeout(Duration::from_secs(2), read).await;
            !matches!(answered, Ok(Ok(_)))
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_mailbox_cell_is_down_still_steps_and_gets_the_mail_later_once() {
    let mut fabric = Fabric::start(5, 4).await;
    let engine = Engine::new(Arc::new(fabric.client_of_all()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hold.whip");
    std::fs::write(&path, LISTEN).unwrap();
    let program = engine.add_program(Program::load(Path::new(&path), None).expect("checks"));
    let (id, state, mailbox) = placed_instance(&fabric, &engine, &program).await;
    let map = fabric.node(5).map().await.expect("map");
    let sent = engine
        .message(&id, "inbox", "hello after the outage", false)
        .await;
    assert!(
        matches!(sent, Ok(whip_fabric::MailAnswer::Delivered { .. })),
        "{sent:?}"
    );

    let kill: Vec<u64> = map.cells[&mailbox]
        .iter()
        .copied()
        .filter(|n| !map.cells[&state].contains(n))
        .collect();
    assert_eq!(
        kill.len(),
        2,
        "{:?} vs {:?}",
        map.cells[&mailbox],
        map.cells[&state]
    );
    for node in &kill {
        fabric.kill(*node).await;
    }
    mailbox_stops_answering(&fabric, &engine, &id).await;
    let stepped = engine.step(&id).await;
    assert!(
        stepped.is_ok(),
        "the step goes on without its mail: {stepped:?}"
    );
    let log = engine.events(&id).await.expect("log");
    let drain_failed = |e: &whip_engine::runtime::Event| e.kind == EventKind::MailDrainFailed;
    assert!(log.iter().any(drain_failed), "{log:?}");
    assert_eq!(
        engine.load(&id).await.unwrap().state.header.status,
        Status::Running
    );

    for node in &kill {
        fabric.start_node(*node).await;
    }
    fabric.wait_leaders(Duration::from_secs(20)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        engine.step(&id).await.expect("step");
        let st = engine.load(&id).await.unwrap().state;
        if st.header.status != Status::Running || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = engine.load(&id).await.unwrap().state;
    assert_eq!(st.header.status, Status::Completed, "{:?}", st.header);
    let admitted = st
        .facts
        .values()
        .filter(|f| f.class == "message.received")
        .count();
    assert_eq!(admitted, 1, "the mail that waited is admitted once");
    fabric.shutdown().await;
}
