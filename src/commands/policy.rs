//! `RECLAIM.POLICY`: `SET`, `GET`, `DEL`, `LIST`, `EXPORT`, `IMPORT`, `PAUSE`, `RESUME`, `HELP`:
//! parse, act through [`crate::state::store`] and [`crate::state::registry`], reply; what `SET`
//! stores is propagated as `RECLAIM.POLICY SET` with every option explicit.

use redis_module::{Context, ContextFlags, RedisString};

use crate::commands::common::{
    policy_or_error, slices, ACCESS, DELETE, INSERT, KEY_GROUP, KEY_RO, KEY_RW, UPDATE,
};
use crate::engine::guards;
use crate::ffi;
use crate::ffi::acl::Caller;
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::model::access;
use crate::model::args::{block, concat, int, key, one_of, string, word, Arg, V010, V020, V030};
use crate::model::clock::now_ms;
use crate::model::error::{self, ReclaimError};
use crate::model::export;
use crate::model::keys;
use crate::model::outcome::Stop;
use crate::model::policy::{self, ListPage, Policy, State};
use crate::state::registry::{self, PolicyId};
use crate::state::store;

const BACKOFF: &[Arg] = &[
    word("FIXED"),
    int("max-ms").token("EXPONENTIAL"),
    int("ms").token("LIST").multiple(),
];
const STORM: &[Arg] = &[int("n"), int("window-ms")];
const YES_NO: &[Arg] = &[word("yes"), word("no")];

/// The options of `RECLAIM.POLICY SET`, each with the version it appeared in (a command newer
/// than an option shows its own version for it); `RECLAIM.SIMULATE` takes them too.
pub const SET_OPTIONS: &[Arg] = &[
    int("ms").token("MIN-IDLE").optional().since(V010),
    int("n").token("MAX-DELIVERIES").optional().since(V010),
    key("dlq-key", 1).token("DLQ").optional().since(V010),
    string("consumer").token("CLAIMANT").optional().since(V010),
    int("n").token("COUNT").optional().since(V010),
    int("ms").token("INTERVAL").optional().since(V010),
    one_of("backoff", BACKOFF)
        .token("BACKOFF")
        .optional()
        .since(V020),
    int("ms").token("LIVENESS").optional().since(V020),
    block("storm", STORM).token("STORM").optional().since(V020),
    int("n").token("DLQ-MAXLEN").optional().since(V020),
    int("ms").token("DLQ-MAXAGE").optional().since(V020),
    one_of("tombstones", YES_NO)
        .token("TOMBSTONES")
        .optional()
        .since(V020),
    int("ms").token("FORGET-IDLE").optional().since(V030),
];

const SET_ARGS: &[Arg] = &concat::<{ KEY_GROUP.len() + SET_OPTIONS.len() }>(KEY_GROUP, SET_OPTIONS);
const PAUSE_ARGS: &[Arg] = &[key("key", 0), string("group"), word("STORM").optional()];
const AFTER: &[Arg] = &[string("stream"), string("group")];
const LIST_ARGS: &[Arg] = &[
    block("after", AFTER).token("AFTER").optional().since(V020),
    int("n").token("COUNT").optional().since(V020),
];
/// The options may come before the document too (docs/commands.md says so); the hint shows one order.
const IMPORT_ARGS: &[Arg] = &[
    string("json"),
    word("REPLACE").optional(),
    word("LOCAL").optional(),
];

/// `RECLAIM.POLICY` and its subcommands, registered in this order (the container first).
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.policy",
        func: None,
        flags: "",
        acl: "",
        first_key: 0,
        arity: -2,
        summary: "Manage reclaim policies",
        complexity: "O(1)",
        since: V010,
        args: &[],
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "set",
        func: entry!("RECLAIM.POLICY SET", policy_set),
        flags: "write deny-oom getkeys-api",
        acl: "write slow",
        first_key: 2,
        arity: -4,
        summary: "Set the reclaim policy of a stream's consumer group",
        complexity: "O(log N) with N policies of the stream",
        since: V010,
        args: SET_ARGS,
        keys: &[
            Spec::Index(2, KEY_RW | UPDATE),
            Spec::Callback(KEY_RW | INSERT),
        ],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "get",
        func: entry!("RECLAIM.POLICY GET", policy_get),
        flags: "readonly",
        acl: "read slow",
        first_key: 2,
        arity: 4,
        summary: "Get a reclaim policy",
        complexity: "O(1)",
        since: V010,
        args: KEY_GROUP,
        keys: &[Spec::Index(2, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "del",
        func: entry!("RECLAIM.POLICY DEL", policy_del),
        flags: "write",
        acl: "write slow",
        first_key: 2,
        arity: 4,
        summary: "Delete a reclaim policy",
        complexity: "O(1)",
        since: V010,
        args: KEY_GROUP,
        keys: &[Spec::Index(2, KEY_RW | DELETE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "pause",
        func: entry!("RECLAIM.POLICY PAUSE", policy_pause),
        flags: "write fast",
        acl: "write fast",
        first_key: 2,
        arity: -4,
        summary: "Pause a reclaim policy (or open its STORM breaker)",
        complexity: "O(1)",
        since: V020,
        args: PAUSE_ARGS,
        keys: &[Spec::Index(2, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "resume",
        func: entry!("RECLAIM.POLICY RESUME", policy_resume),
        flags: "write fast",
        acl: "write fast",
        first_key: 2,
        arity: 4,
        summary: "Resume a paused reclaim policy, or close its STORM breaker",
        complexity: "O(1)",
        since: V020,
        args: KEY_GROUP,
        keys: &[Spec::Index(2, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "list",
        func: entry!("RECLAIM.POLICY LIST", policy_list),
        flags: "readonly",
        acl: "read slow",
        first_key: 0,
        arity: -2,
        summary: "List the reclaim policies of the selected database, all or a page",
        complexity: "O(log M + P) with M the policies of all databases and P those of the selected one; with COUNT, O(log M + N) with N those passed over",
        since: V010,
        args: LIST_ARGS,
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "export",
        func: entry!("RECLAIM.POLICY EXPORT", policy_export),
        flags: "readonly",
        acl: "read slow",
        first_key: 0,
        arity: 2,
        summary: "Export the reclaim policies of the selected database as one JSON document",
        complexity: "O(P) with P policies",
        since: V020,
        args: &[],
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "import",
        func: entry!("RECLAIM.POLICY IMPORT", policy_import),
        flags: "write deny-oom",
        acl: "write slow",
        first_key: 0,
        arity: -3,
        summary: "Import reclaim policies from a JSON document (as EXPORT writes it), all or none",
        complexity: "O(N + P log M) with N the document's length, P its policies, M the policies of a stream",
        since: V020,
        args: IMPORT_ARGS,
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "help",
        func: entry!("RECLAIM.POLICY HELP", policy_help),
        flags: "readonly fast",
        acl: "read fast",
        first_key: 0,
        arity: 2,
        summary: "Show helpful text about the different subcommands",
        complexity: "O(1)",
        since: V010,
        args: &[],
        keys: &[],
    },
];

pub(super) fn policy_map(p: &Policy) -> Vec<(&'static str, Reply)> {
    vec![
        ("min-idle", Reply::Int(p.min_idle_ms)),
        ("max-deliveries", Reply::Int(p.max_deliveries)),
        (
            "dlq",
            p.dlq.clone().map(Reply::Bytes).unwrap_or(Reply::Null),
        ),
        ("claimant", Reply::Bytes(p.claimant.clone())),
        ("count", Reply::Int(p.count)),
        ("interval", Reply::Int(p.interval_ms)),
        ("backoff", Reply::Bytes(p.backoff_words().join(&b' '))),
        ("liveness", Reply::Int(p.liveness_ms)),
        (
            "storm",
            p.storm.map_or(Reply::Null, |s| {
                Reply::Bytes(format!("{} {}", s.max, s.window_ms).into_bytes())
            }),
        ),
        ("dlq-maxlen", Reply::Int(p.dlq_maxlen)),
        ("dlq-maxage", Reply::Int(p.dlq_maxage_ms)),
        (
            "tombstones",
            Reply::Bytes(crate::model::text::yes_no(p.tombstones).to_vec()),
        ),
        ("forget-idle", Reply::Int(p.forget_idle_ms)),
        ("state", Reply::Bytes(p.state.name().as_bytes().to_vec())),
    ]
}

/// `RECLAIM.POLICY SET key group [MIN-IDLE ms] [MAX-DELIVERIES n] [DLQ dlq-key] [CLAIMANT consumer]
/// [COUNT n] [INTERVAL ms] [BACKOFF ...] [LIVENESS ms] [STORM n window-ms] [DLQ-MAXLEN n]
/// [DLQ-MAXAGE ms] [TOMBSTONES yes|no] [FORGET-IDLE ms]` -> `+OK`. Replaces any policy of (key, group) in the selected db and
/// restarts its pass. Propagated to replicas and the AOF as the same command with every option
/// explicit. Errors: see [`policy::parse_set_options`], plus NOPERM when the caller may not do
/// what the policy will do to its keys ([`access::policy_work`]: the timer acts with the rights of
/// whoever set the policy), and WRONGTYPE when the key or the DLQ exists and is not a stream
/// (neither checked when the command comes from the primary or the AOF).
pub(super) fn policy_set(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    if ffi::command::is_keys_request(ctx) {
        ffi::command::key_at(ctx, 2, KEY_RW | UPDATE);
        if let Some(pos) = policy::dlq_position(&a) {
            ffi::command::key_at(ctx, pos, KEY_RW | INSERT);
        }
        return Ok(Reply::Done);
    }
    let (stream, group) = (a[2], a[3]);
    let p = policy::parse_set_options(stream, &a[4..])?;
    let from_primary = ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING);
    if !from_primary {
        ffi::acl::check_caller(ctx, &access::policy_work(stream, group, &p))?;
        if guards::is_non_stream(ctx, stream) {
            return Err(error::WRONGTYPE_STREAM.into());
        }
        if let Some(d) = &p.dlq {
            if guards::is_non_stream(ctx, d) {
                return Err(error::WRONGTYPE_DLQ.into());
            }
        }
    }
    // A stream or group that does not exist yet is fine (the policy waits for it), and is told.
    apply_set(ctx, stream, group, p)?;
    Ok(Reply::Status("OK"))
}

/// What `RECLAIM.POLICY SET` does once its policy is checked (and `IMPORT` for each policy):
/// stores it, restarts its pass, and propagates `RECLAIM.POLICY SET` with every option explicit;
/// then, on a primary, notes and logs what it waits for, if anything ([`guards::check_new_policy`]),
/// and returns that.
fn apply_set(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: Policy,
) -> Result<Option<Stop>, ReclaimError> {
    let repl = store::set_command_args(stream, group, &p);
    store::put(ctx, stream, group, p)?;
    let db = ffi::selected_db(ctx);
    registry::reset(db, stream, group);
    let r: Vec<&[u8]> = repl.iter().map(|v| v.as_slice()).collect();
    ctx.replicate("RECLAIM.POLICY", &r[..]);
    Ok(guards::check_new_policy(
        ctx,
        &PolicyId::new(db, stream, group),
    ))
}

/// The `status` field of `GET` and `LIST`: the policy's status checked live, as `RECLAIM.STATS`
/// shows it ([`guards::status`]).
fn status_field(ctx: &Context, id: &PolicyId, p: &Policy) -> (&'static str, Reply) {
    let (problem, evicted) =
        registry::read(id, |rt| (rt.problem().cloned(), rt.evicted())).unwrap_or((None, false));
    (
        "status",
        Reply::Bytes(guards::status(
            ctx,
            &id.stream,
            &id.group,
            p,
            (problem, evicted),
        )),
    )
}

/// `eviction-risk`: whether this server's `maxmemory` settings can evict the module's keys, `no`
/// or `yes: ` and why (`crate::state::eviction::now`; `RECLAIM.HEALTH` says the same).
pub(super) fn eviction_risk_field() -> (&'static str, Reply) {
    (
        "eviction-risk",
        Reply::Bytes(crate::state::eviction::now().1.into_bytes()),
    )
}

/// `RECLAIM.POLICY GET key group` -> `status` (checked live, as `RECLAIM.STATS`), then the policy
/// as a map ([`policy_map`]) and `eviction-risk`, or nil. NOPERM when the caller may not see the stream's groups
/// ([`access::see_policy`]).
pub(super) fn policy_get(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    ffi::acl::check_caller(ctx, &[access::see_policy(a[2])])?;
    Ok(match store::get(ctx, a[2], a[3]) {
        Some(p) => {
            let id = PolicyId::new(ffi::selected_db(ctx), a[2], a[3]);
            let mut m = vec![status_field(ctx, &id, &p)];
            m.extend(policy_map(&p));
            m.push(eviction_risk_field());
            Reply::Map(m)
        }
        None => Reply::Null,
    })
}

/// `RECLAIM.POLICY DEL key group` -> 1 when a policy was removed, else 0. Its parked entries are
/// handed back (`engine::parked::hand_back`, replicated as it writes); then the command is
/// propagated verbatim when it removed something.
pub(super) fn policy_del(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let policy = store::get(ctx, a[2], a[3]);
    if let Some(p) = &policy {
        crate::engine::parked::check_hand_back(ctx, a[2], a[3], p)?;
    }
    let removed = store::delete(ctx, a[2], a[3]);
    if let (true, Some(p)) = (removed, &policy) {
        // Its parked entries become ordinary pending entries, handed back at once.
        crate::engine::parked::hand_back(ctx, a[2], a[3], p);
    }
    if removed {
        registry::remove(&PolicyId::new(ffi::selected_db(ctx), a[2], a[3]));
        crate::state::eviction::forget_policies(ffi::selected_db(ctx), a[2], Some(a[3]));
        ctx.replicate_verbatim();
    }
    Ok(Reply::Int(removed as i64))
}

/// The policies of the selected database that the caller may see ([`access::see_policy`]: it
/// may read their stream's groups), ordered by key then group (byte order), and how many others
/// there are. O(log M + P), M the policies of all databases, P those of the selected one.
fn policies_in_db(ctx: &Context) -> (Vec<(PolicyId, Policy)>, u64) {
    let ids = registry::page_in_db(ffi::selected_db(ctx), None, usize::MAX);
    let caller = Caller::of(ctx);
    let mut left_out = 0;
    let shown = ids
        .into_iter()
        .filter_map(|id| store::get(ctx, &id.stream, &id.group).map(|p| (id, p)))
        .filter(|(id, _)| {
            let may = caller.may(ctx, &access::see_policy(&id.stream));
            left_out += u64::from(!may);
            may
        })
        .collect();
    (shown, left_out)
}

/// The page of `RECLAIM.POLICY LIST` that `page` asks for: the first `count` policies after
/// `after` that the caller may see (all of them without `COUNT`), by key then group, so the
/// policies the caller may not see never shorten it: fewer than `count` means the listing ended.
/// The registry's ordered index is read in chunks, `count` then twice as many each time: the
/// ones the caller may not see cost O(log P) per chunk plus one policy read each, at most what a
/// LIST of everything costs.
fn list_page(ctx: &Context, page: &ListPage) -> Vec<(PolicyId, Policy)> {
    let count = page.count.unwrap_or(usize::MAX);
    let (db, caller) = (ffi::selected_db(ctx), Caller::of(ctx));
    let mut cursor = page.after.map(|(k, g)| (k.to_vec(), g.to_vec()));
    let mut shown = Vec::new();
    let mut size = count;
    loop {
        let after = cursor.as_ref().map(|(k, g)| (k.as_slice(), g.as_slice()));
        let ids = registry::page_in_db(db, after, size);
        let end = ids.len() < size;
        cursor = ids.last().map(|id| (id.stream.clone(), id.group.clone()));
        for id in ids {
            let Some(p) = store::get(ctx, &id.stream, &id.group) else {
                continue;
            };
            if caller.may(ctx, &access::see_policy(&id.stream)) {
                shown.push((id, p));
                if shown.len() == count {
                    return shown;
                }
            }
        }
        if end {
            return shown;
        }
        size = size.saturating_mul(2);
    }
}

/// `RECLAIM.POLICY LIST [AFTER stream group] [COUNT n]` -> one map per policy of the selected
/// database that the caller may see (`key`, `group`, then the fields of GET), ordered by key then
/// group: all of them (O(log M + P), M the policies of all databases, P those of the selected
/// one), or the first n after (stream, group) (O(log M + the policies passed over)).
pub(super) fn policy_list(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let page = policy::parse_list_options(&a[2..])?;
    let out = list_page(ctx, &page)
        .into_iter()
        .map(|(id, p)| {
            let status = status_field(ctx, &id, &p);
            let mut m = vec![
                ("key", Reply::Bytes(id.stream)),
                ("group", Reply::Bytes(id.group)),
                status,
            ];
            m.extend(policy_map(&p));
            Reply::Map(m)
        })
        .collect();
    Ok(Reply::Array(out))
}

/// `RECLAIM.POLICY EXPORT` -> every policy of the selected database that the caller may see as
/// one JSON document (bulk string), ordered as LIST, every option explicit, with the number of
/// policies left out (`left-out`) when there are some ([`export::to_json`]).
pub(super) fn policy_export(ctx: &Context, _args: &[RedisString]) -> CmdResult {
    let (all, left_out) = policies_in_db(ctx);
    let json = export::to_json(
        all.iter()
            .map(|(id, p)| (id.stream.as_slice(), id.group.as_slice(), p)),
        left_out,
    )?;
    Ok(Reply::Bytes(json.into_bytes()))
}

/// Checks one policy of an IMPORT against the keyspace, in this order: what the caller may do
/// (as SET checks it: [`access::policy_work`]), in Redis Cluster the
/// DLQ's slot and whether this node serves the stream's slot (what SET's routing and `CROSSSLOT`
/// check), the type of the stream and of the DLQ (SET's `WRONGTYPE` checks), the policy key
/// (SET's [`error::POLICY_KEY_TAKEN`]), then, without `REPLACE`, that (key, group) has no policy.
fn import_check(
    ctx: &Context,
    caller: &Caller,
    index: usize,
    p: &export::Imported,
    replace: bool,
) -> Result<(), ReclaimError> {
    let (stream, group, dlq) = (&p.stream, &p.group, p.policy.dlq.as_deref());
    let fail = |field: Option<&str>, e: ReclaimError| {
        export::in_policy(index, Some(stream), Some(group), field, e)
    };
    for w in access::policy_work(stream, group, &p.policy) {
        if !caller.may(ctx, &w) {
            let field = if w.key == error::KEY_DLQ {
                "dlq"
            } else {
                "key"
            };
            return Err(fail(Some(field), w.refused()));
        }
    }
    if ctx.get_flags().contains(ContextFlags::CLUSTER) {
        if dlq.is_some_and(|d| keys::key_slot(d) != keys::key_slot(stream)) {
            return Err(fail(Some("dlq"), error::IMPORT_CROSSSLOT.into()));
        }
        if !ffi::serves_key(ctx, &keys::policy_key(stream)) {
            return Err(fail(Some("key"), error::IMPORT_NOT_SERVED.into()));
        }
    }
    if guards::is_non_stream(ctx, stream) {
        return Err(fail(Some("key"), error::WRONGTYPE_STREAM.into()));
    }
    if dlq.is_some_and(|d| guards::is_non_stream(ctx, d)) {
        return Err(fail(Some("dlq"), error::WRONGTYPE_DLQ.into()));
    }
    match store::has(ctx, stream, group) {
        Err(taken) => Err(fail(Some("key"), taken.into())),
        Ok(true) if !replace => Err(fail(None, error::IMPORT_EXISTS.into())),
        Ok(_) => Ok(()),
    }
}

/// `RECLAIM.POLICY IMPORT json [REPLACE] [LOCAL]` (options before or after the document) -> map
/// `imported` (how many policies), `waiting` (one map per imported policy whose stream or group
/// does not exist: `index` in the document, `key`, `group`, `status`: `waiting: no stream <key>`
/// or `waiting: no group <group>`, in document order; such a policy is imported all the same: it
/// waits, and the log says so) and, with `LOCAL`, `elsewhere` (the policies left out, each a map
/// `key`, `group`, `slot`). Checks the whole document first ([`export::parse_document`], then
/// [`import_check`] for each policy in order) and applies nothing unless all of it is good; then
/// each policy as `RECLAIM.POLICY SET` does ([`apply_set`]), in document order, each propagated as
/// its own `RECLAIM.POLICY SET` (Redis wraps them in one `MULTI`/`EXEC`), so replicas and the AOF
/// never read JSON. Policies the document does not name are not touched.
///
/// `LOCAL`, in Redis Cluster: the policies whose stream's slot this node does not serve are left
/// out before the checks ([`local_policies`]: the same document sent to every primary,
/// `redis-cli --cluster call ... --cluster-only-masters`, imports each policy once, on the node
/// of its slot). `CLUSTERDOWN` while the cluster is down (no node can tell what it serves).
/// Outside a cluster, every policy is local.
pub(super) fn policy_import(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let opts = export::import_args(&a[2..])?;
    let policies = export::parse_document(opts.doc)?;
    let (mine, elsewhere) = if opts.local {
        local_policies(ctx, policies)?
    } else {
        (policies.into_iter().enumerate().collect(), Vec::new())
    };
    let caller = Caller::of(ctx);
    for (i, p) in &mine {
        import_check(ctx, &caller, *i, p, opts.replace)?;
    }
    let n = mine.len() as i64;
    let mut waiting = vec![];
    for (i, p) in mine {
        if let Some(m) = apply_set(ctx, &p.stream, &p.group, p.policy)? {
            let status = m.status_of(&p.stream, &p.group);
            waiting.push(Reply::Map(vec![
                ("index", Reply::Int(i as i64)),
                ("key", Reply::Bytes(p.stream)),
                ("group", Reply::Bytes(p.group)),
                ("status", Reply::Bytes(status)),
            ]));
        }
    }
    let mut reply = vec![
        ("imported", Reply::Int(n)),
        ("waiting", Reply::Array(waiting)),
    ];
    if opts.local {
        reply.push(("elsewhere", Reply::Array(elsewhere)));
    }
    Ok(Reply::Map(reply))
}

/// What `IMPORT ... LOCAL` takes (each policy with its place in the document) and what it reports.
type Local = (Vec<(usize, export::Imported)>, Vec<Reply>);

/// The policies of a document this Redis Cluster node serves now (with their place in the
/// document), and the others as `IMPORT ... LOCAL` reports them (`key`, `group`, `slot`).
/// Outside a cluster, all of them. `CLUSTERDOWN` while the cluster is down.
fn local_policies(ctx: &Context, policies: Vec<export::Imported>) -> Result<Local, ReclaimError> {
    let cluster = ctx.get_flags().contains(ContextFlags::CLUSTER);
    let mut mine = Vec::with_capacity(policies.len());
    let mut elsewhere = Vec::new();
    for (i, p) in policies.into_iter().enumerate() {
        if cluster {
            match ffi::cluster::key_served(ctx, &keys::policy_key(&p.stream)) {
                Some(true) => {}
                Some(false) => {
                    let slot = keys::key_slot(&p.stream) as i64;
                    elsewhere.push(Reply::Map(vec![
                        ("key", Reply::Bytes(p.stream)),
                        ("group", Reply::Bytes(p.group)),
                        ("slot", Reply::Int(slot)),
                    ]));
                    continue;
                }
                None => return Err(error::CLUSTERDOWN.into()),
            }
        }
        mine.push((i, p));
    }
    Ok((mine, elsewhere))
}

/// `RECLAIM.POLICY PAUSE key group [STORM]` -> `+OK`: the policy moves, redelivers and
/// dead-letters nothing until `RECLAIM.POLICY RESUME` (state `paused`; with `STORM`, state
/// `storm`: only dead-letters stop, as when the breaker opens). Stored with the policy (RDB, AOF,
/// replicas); propagated verbatim when it changed the state. Errors: a word other than `STORM`,
/// the policy key taken, no policy.
pub(super) fn policy_pause(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let state = match a.get(4) {
        None => State::Paused,
        Some(w) if w.eq_ignore_ascii_case(b"STORM") && a.len() == 5 => State::Storm,
        Some(_) => return Err(error::PAUSE_SYNTAX.into()),
    };
    change_state(ctx, a[2], a[3], state)
}

/// `RECLAIM.POLICY RESUME key group` -> `+OK`: the policy runs again (state `active`); an open
/// `STORM` breaker closes, and does not open again for one window, so what it held back is
/// dead-lettered. Propagated verbatim when it changed the state. Errors: the policy key taken, no
/// policy.
pub(super) fn policy_resume(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    change_state(ctx, a[2], a[3], State::Active)
}

/// Sets the state of the policy of (stream, group), propagates the command when it changed, and
/// makes the policy due at once. Errors: the policy key holds something else
/// ([`error::POLICY_KEY_TAKEN`], as SET), no policy.
fn change_state(ctx: &Context, stream: &[u8], group: &[u8], state: State) -> CmdResult {
    store::has(ctx, stream, group)?;
    let (id, p) = policy_or_error(ctx, stream, group)?;
    if store::set_state(ctx, stream, group, state) != Some(state) {
        ctx.replicate_verbatim();
        // Announced by store::set_state.
        registry::update(&id, |rt| rt.state_changed(state, p.storm, now_ms()));
        registry::due_now(&id);
    }
    Ok(Reply::Status("OK"))
}

/// `RECLAIM.POLICY HELP` -> the subcommands, one line each (the Redis convention for container
/// commands, as `XINFO HELP`).
pub(super) fn policy_help(_ctx: &Context, _args: &[RedisString]) -> CmdResult {
    let lines: &[&str] = &[
        "RECLAIM.POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SET <key> <group> [MIN-IDLE <ms>] [MAX-DELIVERIES <n>] [DLQ <dlq-key>] [CLAIMANT <consumer>] [COUNT <n>] [INTERVAL <ms>] [BACKOFF FIXED|EXPONENTIAL <max-ms>|LIST <ms> [<ms> ...]] [LIVENESS <ms>] [STORM <n> <window-ms>] [DLQ-MAXLEN <n>] [DLQ-MAXAGE <ms>] [TOMBSTONES yes|no] [FORGET-IDLE <ms>]",
        "    Set (replace) the reclaim policy of a stream's consumer group.",
        "GET <key> <group>",
        "    Return the policy as field/value pairs, its live status first, or nil.",
        "DEL <key> <group>",
        "    Delete the policy (1 if it existed, else 0).",
        "LIST [AFTER <stream> <group>] [COUNT <n>]",
        "    Return the policies of the selected database (all, or the first n after stream and group), each with its live status.",
        "EXPORT",
        "    Return every policy of the selected database as one JSON document.",
        "IMPORT <json> [REPLACE] [LOCAL]",
        "    Set the policies of a JSON document (as EXPORT writes it), all or none; REPLACE replaces existing ones; LOCAL takes only those of the slots this cluster node serves.",
        "PAUSE <key> <group> [STORM]",
        "    Stop the policy's moves, redeliveries and dead-letters (STORM: only its dead-letters).",
        "RESUME <key> <group>",
        "    Let a paused policy run again, or close its STORM breaker.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(
        lines.iter().map(|l| Reply::Status(l)).collect(),
    ))
}
