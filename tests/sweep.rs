//! Sweep behaviour against a real server: claims, dead-letters, deletions, untouched entries,
//! cursor coverage across ticks.

mod common;
use common::*;

#[test]
fn dead_consumer_entries_go_to_the_claimant_with_count_2() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = cmd("XGROUP")
        .arg("CREATE")
        .arg("orders")
        .arg("workers")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut c)
        .unwrap();
    for i in 0..5 {
        let _: String = cmd("XADD")
            .arg("orders")
            .arg("*")
            .arg("n")
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: Value = cmd("XREADGROUP")
        .arg("GROUP")
        .arg("workers")
        .arg("c1")
        .arg("STREAMS")
        .arg("orders")
        .arg(">")
        .query(&mut c)
        .unwrap();
    // The consumer "dies": it never acknowledges.
    let _: () = cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg("orders")
        .arg("workers")
        .arg("MIN-IDLE")
        .arg(200)
        .arg("INTERVAL")
        .arg(50)
        .query(&mut c)
        .unwrap();
    let p = wait_for(10, "all 5 entries claimed", || {
        let p = pending(&mut c, "orders", "workers");
        p.iter().all(|e| e.consumer == "reclaim").then_some(p)
    });
    assert_eq!(p.len(), 5);
    assert!(p.iter().all(|e| e.count == 2), "{p:?}");
    assert_eq!(int_field(&stats(&mut c, "orders", "workers"), "claimed"), 5);
}
