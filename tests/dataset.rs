//! Every key comes back under its own name and in its own database, whatever path it takes
//! (found by `make fuzz`, issue 24): policy values moved by RENAME, COPY, MOVE and RESTORE
//! through an AOF rewrite without the RDB preamble; and clients, transactions, scripts and the
//! AOF loader stay in their own database around MOVE and COPY.

use reclaim_testkit::dataset::{diff, snapshot, Dataset, StreamDetail};
use reclaim_testkit::*;

const DBS: i64 = 4;

fn dataset(s: &Server) -> Dataset {
    let mut c = s.conn();
    snapshot(&mut c, DBS, StreamDetail::default()).expect("snapshot")
}

fn assert_same(before: &Dataset, after: &Dataset, what: &str) {
    let d = diff(before, after, |_, _| true, 20);
    assert!(
        d.is_empty(),
        "{what}: before vs after:\n  {}",
        d.join("\n  ")
    );
}

/// Policy values under their own key, under other names (RENAME, COPY, MOVE, RESTORE), paused,
/// with a TTL, in databases 0 and 2.
fn scatter_policies(s: &Server) {
    let mut c = s.conn();
    for w in [
        &["XGROUP", "CREATE", "orders", "g", "0", "MKSTREAM"][..],
        &[
            "RECLAIM.POLICY",
            "SET",
            "orders",
            "g",
            "DLQ",
            "orders:dlq",
            "MAX-DELIVERIES",
            "3",
        ],
        &["RECLAIM.POLICY", "SET", "orders", "h", "CLAIMANT", "fixer"],
        &["RECLAIM.POLICY", "PAUSE", "orders", "h"],
        &["RECLAIM.POLICY", "SET", "jobs", "g", "MIN-IDLE", "5000"],
        &["RECLAIM.POLICY", "SET", "mail", "g"],
        &["RECLAIM.POLICY", "SET", "kept", "g", "INTERVAL", "500"],
        // Under other names: a plain name, a stream's name, another database.
        &["RENAME", "reclaim:policy:{jobs}:jobs", "parked"],
        &["COPY", "reclaim:policy:{orders}:orders", "s1"],
        &["MOVE", "reclaim:policy:{mail}:mail", "2"],
        &["COPY", "reclaim:policy:{kept}:kept", "elsewhere", "DB", "2"],
        &["EXPIRE", "parked", "100000"],
    ] {
        run(&mut c, w);
    }
    let payload: Vec<u8> = cmd("DUMP")
        .arg("reclaim:policy:{orders}:orders")
        .query(&mut c)
        .expect("DUMP");
    let _: () = cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(payload)
        .query(&mut c)
        .expect("RESTORE");
}

#[test]
fn policy_values_come_back_under_their_own_names_from_an_aof_without_preamble() {
    let mut s = Server::start(&[
        "--appendonly",
        "yes",
        "--aof-use-rdb-preamble",
        "no",
        "--databases",
        "4",
    ]);
    scatter_policies(&s);
    let mut c = s.conn();
    let _: Value = cmd("BGREWRITEAOF").query(&mut c).expect("BGREWRITEAOF");
    wait_aof_rewrite_done(&mut c);
    let before = dataset(&s);
    assert_eq!(before.len(), 8, "{:?}", before.keys().collect::<Vec<_>>());

    // The base: RECLAIM.POLICY SET for the values at their own policy key, RESTORE of the others.
    let files = s.aof_manifest_files();
    let base = files.iter().find(|f| f.1 == "b").expect("a base AOF file");
    let mut db = 0;
    let mut restored: Vec<(i64, String)> = Vec::new();
    let mut set: Vec<(i64, String)> = Vec::new();
    for c in parse_aof(&base.2) {
        let arg = |i: usize| String::from_utf8_lossy(&c[i]).into_owned();
        if is_cmd(&c, "SELECT") {
            db = arg(1).parse().expect("SELECT db");
        } else if is_cmd(&c, "RESTORE") {
            restored.push((db, arg(1)));
        } else if is_cmd(&c, "RECLAIM.POLICY") && arg(1) == "SET" {
            set.push((db, arg(2)));
        }
    }
    restored.sort();
    set.sort();
    assert_eq!(
        restored,
        [
            (0, "parked".to_string()),
            (0, "restored".into()),
            (0, "s1".into()),
            (2, "elsewhere".into()),
        ]
    );
    assert_eq!(
        set,
        [
            (0, "kept".to_string()),
            (0, "orders".into()),
            (0, "orders".into()),
            (2, "mail".into()),
        ]
    );

    s.shutdown();
    s.restart();
    assert_same(&before, &dataset(&s), "restart from the AOF");
    // The moved value works in its new database, paused state and all.
    let mut c = s.conn();
    assert_eq!(
        get_policy(&mut c, b"orders", b"h").map(|p| p.state),
        Some(b"paused".to_vec())
    );
    let mut c2 = s.conn_db(2);
    assert!(get_policy(&mut c2, b"mail", b"g").is_some());
    // And DEBUG LOADAOF, a rewrite of the rewrite, agree.
    let _: Value = cmd("BGREWRITEAOF").query(&mut c).expect("BGREWRITEAOF");
    wait_aof_rewrite_done(&mut c);
    s.shutdown();
    s.restart();
    assert_same(&before, &dataset(&s), "restart after a second rewrite");
}

#[test]
fn policy_values_come_back_the_same_from_every_persistence_path() {
    let mut s = Server::start(&["--databases", "4", "--enable-debug-command", "yes"]);
    scatter_policies(&s);
    let before = dataset(&s);
    let mut c = s.conn();
    let _: () = cmd("DEBUG")
        .arg("RELOAD")
        .query(&mut c)
        .expect("DEBUG RELOAD");
    assert_same(&before, &dataset(&s), "DEBUG RELOAD");
    for preamble in ["yes", "no"] {
        let mut c = s.conn();
        let _: () = cmd("CONFIG")
            .arg("SET")
            .arg("aof-use-rdb-preamble")
            .arg(preamble)
            .query(&mut c)
            .expect("CONFIG SET");
        let _: () = cmd("CONFIG")
            .arg("SET")
            .arg("appendonly")
            .arg("yes")
            .query(&mut c)
            .expect("CONFIG SET");
        wait_aof_rewrite_done(&mut c);
        let _: Value = cmd("BGREWRITEAOF").query(&mut c).expect("BGREWRITEAOF");
        wait_aof_rewrite_done(&mut c);
        let _: () = cmd("DEBUG")
            .arg("LOADAOF")
            .query(&mut c)
            .expect("DEBUG LOADAOF");
        assert_same(
            &before,
            &dataset(&s),
            &format!("DEBUG LOADAOF, preamble {preamble}"),
        );
        let _: () = cmd("CONFIG")
            .arg("SET")
            .arg("appendonly")
            .arg("no")
            .query(&mut c)
            .expect("CONFIG SET");
    }
    let r = s.replica(&["--databases", "4"]);
    let mut c = s.conn();
    replica_acked(&mut c);
    assert_same(&before, &dataset(&r), "the replica after a full sync");
    drop(r);
    s.kill();
}

fn db_of(c: &mut Connection) -> i64 {
    let info: String = cmd("CLIENT").arg("INFO").query(c).expect("CLIENT INFO");
    info.split_whitespace()
        .find_map(|f| f.strip_prefix("db="))
        .and_then(|d| d.parse().ok())
        .expect("db= in CLIENT INFO")
}

/// The databases `key` is in (0..4).
fn where_is(s: &Server, key: &str) -> Vec<i64> {
    (0..DBS)
        .filter(|db| {
            let mut c = s.conn_db(*db);
            exists(&mut c, key)
        })
        .collect()
}

#[test]
fn clients_transactions_and_scripts_stay_in_their_database_around_move_and_copy() {
    let s = Server::start(&["--databases", "4"]);
    let r = s.replica(&["--databases", "4"]);
    let mut c = s.conn();
    // A transaction of MOVEs (Valkey 8.1.8 left the client in database 1: `z` and `w` landed
    // there, and the replica kept `y` in database 0).
    for w in [
        &["SET", "x", "1"][..],
        &["SET", "y", "1"],
        &["MULTI"],
        &["MOVE", "x", "1"],
        &["MOVE", "y", "1"],
        &["SET", "z", "1"],
        &["EXEC"],
        &["SET", "w", "1"],
    ] {
        run(&mut c, w);
    }
    assert_eq!(db_of(&mut c), 0);
    assert_eq!(where_is(&s, "z"), [0]);
    assert_eq!(where_is(&s, "w"), [0]);
    assert_eq!(where_is(&s, "y"), [1]);
    // COPY ... DB at once, in a transaction after a SELECT, and one that copies nothing.
    let mut c1 = s.conn_db(1);
    for w in [
        &["SET", "a", "1"][..],
        &["COPY", "a", "b", "DB", "2"],
        &["SET", "after-copy", "1"],
        &["MULTI"],
        &["SELECT", "0"],
        &["COPY", "a", "b"],
        &["SET", "in-multi", "1"],
        &["EXEC"],
        &["SET", "after-multi", "1"],
        &["SELECT", "1"],
        &["MULTI"],
        &["COPY", "missing", "b", "DB", "3"],
        &["SELECT", "2"],
        &["COPY", "b", "c", "DB", "3"],
        &["SELECT", "9"],
        &["SET", "end-of-multi", "1"],
        &["EXEC"],
    ] {
        let _: Value = cmd(w[0]).arg(&w[1..]).query(&mut c1).unwrap_or(Value::Nil);
    }
    assert_eq!(db_of(&mut c1), 2);
    assert_eq!(where_is(&s, "after-copy"), [1]);
    assert_eq!(where_is(&s, "in-multi"), [0]);
    assert_eq!(where_is(&s, "after-multi"), [0]);
    assert_eq!(where_is(&s, "end-of-multi"), [2]);
    assert_eq!(where_is(&s, "c"), [3]);
    // Scripts: the write after MOVE or COPY ... DB lands in the caller's database.
    let mut c3 = s.conn_db(3);
    for w in [
        &["SET", "m", "1"][..],
        &[
            "EVAL",
            "redis.call('move', KEYS[1], 0) return redis.call('set', KEYS[2], 'x')",
            "2",
            "m",
            "script-move",
        ],
        &["SET", "n", "1"],
        &[
            "EVAL",
            "redis.call('copy', KEYS[1], KEYS[2], 'DB', 0) return redis.call('set', KEYS[3], 'x')",
            "3",
            "n",
            "n2",
            "script-copy",
        ],
        &["SWAPDB", "1", "2"],
        &["SET", "last", "1"],
    ] {
        run(&mut c3, w);
    }
    assert_eq!(db_of(&mut c3), 3);
    assert_eq!(where_is(&s, "script-move"), [3]);
    assert_eq!(where_is(&s, "script-copy"), [3]);
    assert_eq!(where_is(&s, "last"), [3]);
    // The replica applied the same commands in the same databases.
    replica_acked(&mut c);
    assert_same(&dataset(&s), &dataset(&r), "the replica");
}

/// Writes `cmds` with AOF on, restarts from the AOF, and checks the dataset came back.
fn aof_round_trip(cmds: &[&[&str]]) -> Server {
    let mut s = Server::start(&[
        "--databases",
        "4",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let mut c = s.conn();
    for w in cmds {
        run(&mut c, w);
    }
    let before = dataset(&s);
    s.shutdown();
    s.restart();
    assert_same(&before, &dataset(&s), "restart from the AOF");
    s
}

#[test]
fn the_aof_loader_stays_in_its_database_around_move() {
    let s = aof_round_trip(&[
        &["SET", "a", "1"],
        &["MOVE", "a", "1"],
        &["SET", "after-move", "1"],
        &["SET", "b", "1"],
        &["MULTI"],
        &["MOVE", "b", "3"],
        &["SET", "in-multi", "1"],
        &["EXEC"],
        &["SET", "after-multi", "1"],
    ]);
    assert_eq!(where_is(&s, "after-multi"), [0]);
}

#[test]
fn the_aof_loader_stays_in_its_database_around_copy() {
    if server_binary().contains("valkey") {
        // Valkey 8.1.1 to 8.1.x: the AOF loader runs no command filter, and `copy_to` has no
        // event before it in the source database: the commands after `COPY ... DB` load into
        // the destination database until the next `SELECT` (valkey-io/valkey#4024).
        eprintln!("skipped on Valkey 8.1: COPY ... DB in the AOF is the server's own defect");
        return;
    }
    let s = aof_round_trip(&[
        &["SET", "b", "1"],
        &["COPY", "b", "b2", "DB", "2"],
        &["SET", "after-copy", "1"],
    ]);
    assert_eq!(where_is(&s, "after-copy"), [0]);
}
