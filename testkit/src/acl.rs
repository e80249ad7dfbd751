//! ACL users: creating them, and connections authenticated as one.

use redis::{cmd, Connection, Value};

use crate::server::Server;

/// `ACL SETUSER <args...>` (a user name and its rules: `["app", "on", "nopass", "~app:*",
/// "+@all"]`), which must answer OK.
pub fn acl_setuser(con: &mut Connection, args: &[&str]) {
    let r: Value = cmd("ACL")
        .arg("SETUSER")
        .arg(args)
        .query(con)
        .unwrap_or_else(|e| panic!("ACL SETUSER {args:?}: {e}"));
    assert!(crate::replies::is_ok(&r), "ACL SETUSER {args:?}: {r:?}");
}

impl Server {
    /// A new connection authenticated as `user` (the tests' users are all `nopass`).
    pub fn conn_as(&self, user: &str) -> Connection {
        let mut c = self.conn();
        let r: Value = cmd("AUTH")
            .arg(user)
            .arg("any")
            .query(&mut c)
            .unwrap_or_else(|e| panic!("AUTH {user}: {e}"));
        assert!(crate::replies::is_ok(&r), "AUTH {user}: {r:?}");
        c
    }
}
