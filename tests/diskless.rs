//! Diskless load on replicas (`repl-diskless-load on-empty-db` and `swapdb`): the module declares
//! that its data type handles read errors and async loading, so a replica loads a full sync
//! straight from the socket; policies arrive whole, a sync that fails halfway leaves the replica's
//! old policies (and nothing of the failed sync) behind, and a promoted replica sweeps.

use reclaim_testkit::*;

/// A primary that syncs over the socket at once (`repl-diskless-sync`, no delay).
fn diskless_primary(extra: &[&str]) -> Server {
    let mut args = vec![
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

/// The policies of databases 0 and 3, sorted, for comparing servers.
fn all_policies(s: &Server) -> Vec<(i64, Vec<u8>, Vec<u8>, PolicyView)> {
    let mut out = Vec::new();
    for db in [0, 3] {
        let mut con = s.conn_db(db);
        for (k, g, p) in list_policies(&mut con) {
            out.push((db, k, g, p));
        }
    }
    out.sort_by(|a, b| (a.0, &a.1, &a.2).cmp(&(b.0, &b.1, &b.2)));
    out
}

/// RDB files in the server's directory (a disk-based sync leaves `dump.rdb` or `temp-*.rdb`).
fn rdb_files(s: &Server) -> Vec<String> {
    std::fs::read_dir(s.dir.path())
        .expect("read server dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rdb"))
        .collect()
}

/// Checks that every full sync in the replica's log was read straight from the socket.
fn assert_loaded_from_socket(r: &Server) {
    let log = r.log();
    assert!(
        !log.contains("Skipping diskless-load"),
        "the replica refused diskless load:\n{}",
        r.log_tail(30)
    );
    assert!(
        log.contains("with EOF to parser") && !log.contains("to disk"),
        "the replica did not load from the socket:\n{}",
        r.log_tail(30)
    );
    assert_eq!(
        rdb_files(r),
        Vec::<String>::new(),
        "RDB files on the replica"
    );
}

/// A primary with policies in two databases (binary names included) and, in database 0, an entry
/// that a crashed consumer left pending.
fn primary_with_policies() -> Server {
    let p = diskless_primary(&[]);
    let mut p0 = p.conn_db(0);
    let mut p3 = p.conn_db(3);
    set_policy(
        &mut p0,
        BIN_STREAM,
        BIN_GROUP,
        &PolicyView::new(500, 100).with_dlq(b"dlq\x00a", 4),
    );
    set_policy(&mut p3, b"orders", b"workers", &PolicyView::new(1_000, 50));
    create_group(&mut p0, b"jobs", b"g");
    add_entries(&mut p0, b"jobs", "job", 1);
    read_group(&mut p0, b"jobs", b"g", b"crashed");
    // Long enough that the primary does not move it before the replica takes over.
    set_policy(&mut p0, b"jobs", b"g", &PolicyView::new(3_000, 20));
    p
}

#[test]
fn replicas_load_policies_from_the_socket_and_sweep_after_promotion() {
    let p = primary_with_policies();
    let want = all_policies(&p);
    assert_eq!(want.len(), 3);
    for mode in ["on-empty-db", "swapdb"] {
        let r = p.replica(&["--repl-diskless-load", mode]);
        assert_loaded_from_socket(&r);
        assert_eq!(all_policies(&r), want, "policies on the {mode} replica");
        let mut rc = r.conn();
        assert_eq!(reclaim_info(&mut rc, "policies"), 3, "{mode}");
        assert!(
            info(&mut rc, "modules")
                .iter()
                .any(|(k, v)| k == "module" && v.contains("handle-io-errors")),
            "INFO modules: {:?}",
            info(&mut rc, "modules")
        );
    }
    // The last replica takes over: its sweep moves the crashed consumer's entry to the inbox.
    let r = p.replica(&["--repl-diskless-load", "swapdb"]);
    drop(p);
    let mut rc = r.conn();
    promote(&mut rc);
    let owner = wait_for(20, "the promoted replica to move the entry", || {
        let p = pending_raw(&mut rc, b"jobs", b"g");
        (p.len() == 1 && p[0].1 == b"reclaim").then(|| p[0].clone())
    });
    assert_eq!(owner.2, 1, "a move: the delivery count stays 1");
}

/// A primary whose full sync is slow (5 ms per key, `rdb-key-save-delay`) and holds `n`
/// policies on streams `slow:<i>` with group `g`, and `n` keys of 1 KB beside them (so that a
/// replica's load reads enough bytes between keys to serve clients meanwhile, see [`REPLICA`]).
fn slow_primary(n: usize) -> Server {
    // Uncompressed, so that the 1 KB values reach the replica as they are written.
    let p = diskless_primary(&["--rdb-key-save-delay", "5000", "--rdbcompression", "no"]);
    let mut con = p.conn();
    for i in 0..n {
        let s = format!("slow:{i}");
        set_policy(&mut con, s.as_bytes(), b"g", &PolicyView::new(1_000, 100));
        let _: () = cmd("SET")
            .arg(format!("filler:{i}"))
            .arg(vec![b'x'; 1024])
            .query(&mut con)
            .expect("SET");
    }
    p
}

/// Replica options for the tests that watch a load in progress: a loading replica serves
/// clients (INFO, reads of the old data while loading asynchronously) after every KB it reads,
/// not only every 2 MB.
const REPLICA: [&str; 2] = ["--loading-process-events-interval-bytes", "1024"];

/// Waits until `r` has loaded a third of a [`slow_primary`]'s sync of 100 policies (about 40 KB
/// of its 110 KB, `INFO persistence` `loading_loaded_bytes`): policy keys are among what it read.
fn wait_loading(r: &Server) {
    let mut con = r.conn();
    wait_for(
        30,
        "the replica to be a third into loading the sync",
        || {
            let i = info(&mut con, "persistence");
            i.iter()
                .any(|(k, v)| k == "loading_loaded_bytes" && v.parse().unwrap_or(0) >= 40_000)
                .then_some(())
        },
    );
}

/// Kills `p` in the middle of `r`'s full sync from it, and waits until `r` gave that sync up.
fn abort_sync(p: &mut Server, r: &Server) {
    wait_loading(r);
    p.kill_with_children();
    wait_for(30, "the replica to give the sync up", || {
        r.log()
            .contains("synchronization DB from socket")
            .then_some(())
    });
    let mut con = r.conn();
    wait_for(10, "the replica to stop loading", || {
        let i = info(&mut con, "persistence");
        i.iter()
            .any(|(k, v)| k == "loading" && v == "0")
            .then_some(())
    });
}

#[test]
fn aborted_sync_into_an_empty_replica_leaves_nothing() {
    let mut p = slow_primary(100);
    let r = Server::start(&[&REPLICA[..], &["--repl-diskless-load", "on-empty-db"]].concat());
    let mut rc = r.conn();
    replicaof(&mut rc, &p);
    abort_sync(&mut p, &r);
    assert_loaded_from_socket(&r);
    assert_eq!(all_policies(&r), Vec::new());
    assert_eq!(reclaim_info(&mut rc, "policies"), 0);
    let keys: i64 = cmd("DBSIZE").query(&mut rc).expect("DBSIZE");
    assert_eq!(keys, 0);
}

#[test]
fn aborted_swapdb_sync_keeps_the_old_policies() {
    // The replica first syncs a small primary, then switches to a slow one that dies halfway.
    let old = primary_with_policies();
    let want = all_policies(&old);
    let r = old.replica(&[&REPLICA[..], &["--repl-diskless-load", "swapdb"]].concat());
    assert_eq!(all_policies(&r), want);
    let mut p = slow_primary(100);
    let mut rc = r.conn();
    replicaof(&mut rc, &p);
    abort_sync(&mut p, &r);
    assert_loaded_from_socket(&r);
    assert!(
        r.log().contains("Discarding temporary DB"),
        "{}",
        r.log_tail(20)
    );
    assert_eq!(all_policies(&r), want, "the replica's old policies");
    assert_eq!(reclaim_info(&mut rc, "policies"), 3, "nothing of the sync");
}

#[test]
fn async_load_serves_old_policies_and_an_abort_keeps_them() {
    // A full sync from the same primary (same replication ID) loads asynchronously: the replica
    // keeps serving its old data, policies included, until the new data is swapped in.
    let mut p = slow_primary(100);
    let r = p.replica(&[&REPLICA[..], &["--repl-diskless-load", "swapdb"]].concat());
    let want = all_policies(&p);
    assert_eq!(all_policies(&r), want);
    // Force a full resync: drop the link, and write more than the primary's backlog holds before
    // the replica reconnects, so a partial resync is impossible.
    let mut pc = p.conn();
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("repl-backlog-size")
        .arg("16384")
        .query(&mut pc)
        .expect("CONFIG SET");
    let mut pipe = redis::pipe();
    pipe.cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica");
    for i in 0..64 {
        pipe.cmd("SET")
            .arg(format!("more:{i}"))
            .arg(vec![b'x'; 1024])
            .ignore();
    }
    let _: Value = pipe.query(&mut pc).expect("kill the link and write");
    let mut rc = r.conn();
    wait_loading(&r);
    assert_eq!(info_int(&mut rc, "persistence", "async_loading"), 1);
    // While loading, the old policies are served.
    assert_eq!(all_policies(&r), want, "policies while loading");
    assert_eq!(reclaim_info(&mut rc, "policies"), 100);
    p.kill_with_children();
    wait_for(30, "the replica to give the sync up", || {
        r.log().contains("Discarding temporary DB").then_some(())
    });
    assert_loaded_from_socket(&r);
    assert_eq!(all_policies(&r), want, "policies after the abort");
    assert_eq!(reclaim_info(&mut rc, "policies"), 100);
}
