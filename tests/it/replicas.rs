//! Several endpoints, one fleet (the "Replicas" issue): the fleet's state in a real PostgreSQL
//! (Debian's, started by the test on a Unix socket), shared by every endpoint that names it.

use clawbridge::{Store, ThreadRecord};

fn thread(id: &str, owner: &str) -> ThreadRecord {
    ThreadRecord {
        id: id.into(),
        identity: "apiKey-1a2b3c4d5e6f7a8b".into(),
        member: "local-0".into(),
        owner: owner.into(),
        session_key: None,
        fingerprint: None,
        rollout: Some("/homes/a/sessions/rollout-1.jsonl".into()),
        epoch: 1,
        gone: false,
        last_used: 1_800_000_000,
        home: None,
    }
}

/// Two stores on one database (two endpoints): what one writes the other reads (threads and
/// their owners, a session's binding moved, usage, the pinned `initialize` answer, members),
/// the schema is made once and taken as it is by the second, and the password of the URL is
/// in no message, `Debug` or path.
#[ignore = "needs PostgreSQL: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn two_stores_on_one_database_see_one_fleet_and_never_show_its_password() {
    let server = crate::util::Postgres::start();
    let url = server.url();
    let a = Store::open_postgres(&url).expect("endpoint A's store");
    let b = Store::open_postgres(&url).expect("endpoint B's store");
    for store in [&a, &b] {
        let shown = format!("{} {store:?}", store.path().display());
        assert!(!shown.contains("pg-secret-4417"), "{shown}");
        assert!(store.is_shared());
    }
    a.put_thread(thread("t-1", "alice"));
    a.put_thread(ThreadRecord {
        session_key: Some("agent:main:telegram:direct:1".into()),
        ..thread("t-2", "bob")
    });
    a.put_usage("apiKey-1a2b3c4d5e6f7a8b", 20_600, 45);
    a.put_runtime("endpoint", r#"{"userAgent":"x/0.169.0"}"#);
    a.put_member(clawbridge::MemberRecord {
        name: "local-0@apiKey-1a2b3c4d5e6f7a8b".into(),
        identity: "apiKey-1a2b3c4d5e6f7a8b".into(),
        codex_version: Some("0.169.0".into()),
        seen: 1_800_000_000,
    });
    a.flush();
    assert_eq!(b.thread("t-1"), Some(thread("t-1", "alice")));
    assert_eq!(b.thread("t-404"), None);
    assert_eq!(
        b.session("agent:main:telegram:direct:1")
            .map(|thread| thread.id),
        Some("t-2".to_string())
    );
    assert_eq!(
        b.usage_on(20_600),
        vec![("apiKey-1a2b3c4d5e6f7a8b".to_string(), 45)]
    );
    assert_eq!(
        b.runtime("endpoint").as_deref(),
        Some(r#"{"userAgent":"x/0.169.0"}"#)
    );
    // Two endpoints pinning their members' answers at once: the first pinned is everyone's
    // (a later one on newer members never replaces it).
    assert_eq!(
        a.pin_runtime("pinned-together", r#"{"userAgent":"x/0.169.0"}"#)
            .as_deref(),
        Some(r#"{"userAgent":"x/0.169.0"}"#)
    );
    assert_eq!(
        b.pin_runtime("pinned-together", r#"{"userAgent":"x/0.171.0"}"#)
            .as_deref(),
        Some(r#"{"userAgent":"x/0.169.0"}"#)
    );
    assert_eq!(b.members().len(), 1);
    assert_eq!(b.thread_count(), 2);
    // B moves the session to a new thread: A sees the old one unbound.
    b.put_thread(ThreadRecord {
        session_key: Some("agent:main:telegram:direct:1".into()),
        ..thread("t-3", "bob")
    });
    b.put_thread_now(thread("t-4", "carol")).expect("kept now");
    assert_eq!(a.thread("t-2").and_then(|thread| thread.session_key), None);
    assert_eq!(
        a.session("agent:main:telegram:direct:1")
            .map(|thread| thread.id),
        Some("t-3".to_string())
    );
    assert_eq!(
        a.thread("t-4").map(|thread| thread.owner),
        Some("carol".into())
    );
    assert_eq!(
        a.identities_with_threads().into_iter().collect::<Vec<_>>(),
        ["apiKey-1a2b3c4d5e6f7a8b"]
    );
    assert_eq!(a.prune_threads(1_900_000_000, 1), 1, "one at a time");
    assert_eq!(a.thread_count(), 3);
    drop((a, b));
    // Opened again (a restart): everything is there, the schema is not made twice.
    let again = Store::open_postgres(&url).expect("reopened");
    assert_eq!(again.thread_count(), 3);

    // A wrong URL: the error names the store without its password.
    let wrong = url.replace("/postgres", "/no-such-database");
    let error = Store::open_postgres(&wrong)
        .expect_err("no such database")
        .to_string();
    assert!(
        error.contains("no-such-database") && !error.contains("pg-secret-4417"),
        "{error}"
    );
    let not_a_url = Store::open_at(
        Some("mysql://u:hunter2@h/db"),
        std::path::Path::new("/s/app-server.db"),
    )
    .expect_err("not postgres")
    .to_string();
    assert!(
        not_a_url.contains("not a postgres:// URL") && !not_a_url.contains("hunter2"),
        "{not_a_url}"
    );
}

/// Protection: a read is bounded. A database that stops answering (paused with SIGSTOP) costs a
/// reader at most the answer timeout (10 s), never a hang of the request that asked; once it
/// answers again, so does the store.
#[ignore = "needs PostgreSQL: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn a_database_that_stops_answering_costs_a_reader_a_bounded_wait() {
    let server = crate::util::Postgres::start();
    let store = Store::open_postgres(&server.url()).expect("store");
    store.put_thread(thread("t-1", "alice"));
    store.flush();
    server.signal("-STOP");
    let asked = std::time::Instant::now();
    let answer = store.thread("t-1");
    let waited = asked.elapsed();
    server.signal("-CONT");
    assert_eq!(answer, None, "no answer from a paused database");
    assert!(
        waited >= std::time::Duration::from_secs(9) && waited < std::time::Duration::from_secs(15),
        "bounded by the answer timeout: {waited:?}"
    );
    let again = crate::util::poll(std::time::Duration::from_secs(20), || store.thread("t-1"));
    assert_eq!(again.map(|thread| thread.owner), Some("alice".to_string()));
}
