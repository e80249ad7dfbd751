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

/// `ACL SETUSER <user> on nopass <rules...>`: a user in a role, given by its rules (`["~s:*",
/// "%R~s:dlq", "+@all"]`); what it had before stays unless `rules` reset it.
pub fn acl_user(con: &mut Connection, user: &str, rules: &[&str]) {
    acl_setuser(con, &[&[user, "on", "nopass"][..], rules].concat());
}

/// A role's table of answers: one row per command of `names`, each answering `default` but the
/// `except` ones (their own answer). The table is written once; a role names only how it differs.
pub fn role_table<'a, W: Clone>(
    names: impl IntoIterator<Item = &'a str>,
    default: W,
    except: &[(&'a str, W)],
) -> Vec<(&'a str, W)> {
    names
        .into_iter()
        .map(|n| {
            let w = except.iter().find(|(e, _)| *e == n).map(|(_, w)| w);
            (n, w.unwrap_or(&default).clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::role_table;

    #[test]
    fn a_role_table_differs_from_its_default_only_where_told() {
        let t = role_table(["get", "set", "del"], 0, &[("set", 1), ("other", 2)]);
        assert_eq!(t, [("get", 0), ("set", 1), ("del", 0)]);
    }
}
