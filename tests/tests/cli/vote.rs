//! Issue 18's contract lines on a 3-voter dev cell: `whip team role`, `whip vote open …
//! --json` (`{"proposal": …}`), `whip vote cast … --json` (accepted with its sequence, or
//! refused with its reason and exit 1: a worker is `not_eligible`), `whip vote close` by
//! the opener and `whip vote show --json` (state, outcome, winner, ballots, rounds), and
//! `whip vote list`.

use serde_json::Value;

fn code_and_json(out: &std::process::Output) -> (i32, Value) {
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json)
}

/// Team `council`: `lead` supervises, `ann` and `bo` are coordinators, `wes` a worker; a
/// coordinator cannot give roles.
fn council(cli: &super::DevCli) {
    let ok = |args: &[&str]| super::json_of(&cli.run(&[args, &["--json"]].concat()));
    ok(&["team", "create", "council", "--agent", "lead"]);
    for member in ["ann", "bo", "wes"] {
        ok(&["agent", "register", "--agent", member]);
        ok(&[
            "team", "join", "council", "--member", member, "--agent", "lead",
        ]);
    }
    for member in ["ann", "bo"] {
        let set = ok(&[
            "team",
            "role",
            "council",
            "--member",
            member,
            "--role",
            "coordinator",
            "--agent",
            "lead",
        ]);
        assert_eq!(set["outcome"], "set", "{set}");
    }
    let (code, refused) = code_and_json(&cli.run(&[
        "team",
        "role",
        "council",
        "--member",
        "wes",
        "--role",
        "coordinator",
        "--agent",
        "ann",
        "--json",
    ]));
    assert_eq!(
        (code, &refused["reason"]),
        (1, &"not_supervisor".into()),
        "{refused}"
    );
}

#[test]
fn vote_contract_lines_answer_as_documented() {
    let cli = super::DevCli::start();
    let ok = |args: &[&str]| super::json_of(&cli.run(&[args, &["--json"]].concat()));
    council(&cli);
    let open = "vote open council --title 2.0 --option ship --option wait --option drop \
                --method irv --quorum 0.5 --threshold 2/3 --closes 10m --agent lead";
    let opened = ok(&open.split_whitespace().collect::<Vec<_>>());
    let proposal = opened["proposal"].as_str().expect("an id").to_string();
    assert!(proposal.starts_with("council#"), "{opened}");

    let cast = |agent: &str, choices: &[&str]| {
        let mut args = vec!["vote", "cast", proposal.as_str()];
        for choice in choices {
            args.extend(["--choice", choice]);
        }
        args.extend(["--agent", agent, "--json"]);
        code_and_json(&cli.run(&args))
    };
    let (code, first) = cast("ann", &["wait", "ship"]);
    assert_eq!(
        (code, &first["outcome"], &first["seq"]),
        (0, &"accepted".into(), &1.into())
    );
    let (code, worker) = cast("wes", &["ship"]);
    assert_eq!(
        (code, &worker["outcome"]),
        (1, &"refused".into()),
        "{worker}"
    );
    assert_eq!(worker["reason"], "not_eligible");
    let (_, second) = cast("ann", &["ship", "wait"]);
    assert_eq!(second["seq"], 2, "a voter casts again; both ballots stay");
    cast("bo", &["drop", "ship"]);
    cast("lead", &["wait", "ship"]);

    let (code, not_opener) =
        code_and_json(&cli.run(&["vote", "close", &proposal, "--agent", "bo", "--json"]));
    assert_eq!(
        (code, &not_opener["reason"]),
        (1, &"not_opener".into()),
        "{not_opener}"
    );
    let closed = ok(&["vote", "close", &proposal, "--agent", "lead"]);
    assert_eq!(closed["result"], "passed", "{closed}");

    shown_as_documented(&ok(&["vote", "show", &proposal]));
    let (code, late) = cast("bo", &["wait"]);
    assert_eq!((code, &late["reason"]), (1, &"closed".into()), "{late}");

    let listed = ok(&["vote", "list", "council"]);
    let proposals = listed["proposals"].as_array().expect("proposals");
    assert_eq!(proposals.len(), 1, "{listed}");
    assert_eq!(proposals[0]["proposal"], proposal.as_str());
    let with_ballots = ok(&["vote", "show", &proposal, "--ballots"]);
    assert_eq!(
        with_ballots["ballot_list"].as_array().map(Vec::len),
        Some(4)
    );

    let bad = "vote open council --title x --option a --method dice --closes 1m --agent lead";
    let bad = cli.run(&bad.split_whitespace().collect::<Vec<_>>());
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown method is a usage error"
    );
}

/// `whip vote show --json` of the closed instant-runoff proposal.
fn shown_as_documented(shown: &Value) {
    assert_eq!(shown["state"], "closed", "{shown}");
    assert_eq!(shown["outcome"], "passed");
    assert_eq!(shown["winner"], "ship");
    assert_eq!(shown["ballots"], 4);
    let rounds = shown["rounds"].as_array().expect("rounds");
    // ship 1, wait 1, drop 1: a tie in the only round so far drops the option listed
    // last; its ballot moves to ship, which then holds 2 of 3 (two thirds: passed).
    assert_eq!(rounds.len(), 2, "{shown}");
    assert_eq!(rounds[0]["counts"]["ship"], 1);
    assert_eq!(rounds[0]["eliminated"], "drop");
    assert_eq!(rounds[1]["counts"]["ship"], 2);
    assert_eq!((&shown["support"], &shown["base"]), (&2.into(), &3.into()));
}
