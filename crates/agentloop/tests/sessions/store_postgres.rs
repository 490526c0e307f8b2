//! The session store conformance suite (`store_conformance/`) on `PostgresStore`, plus what
//! only PostgreSQL has. Runs when `AGENTLOOP_TEST_POSTGRES_URL` names a database the user may
//! create schemas in (`.ci/setup-postgres` starts one and prints the URL); otherwise each test
//! returns at once and one `SKIPPED suite` line says what to set (a failure under
//! `AGENTLOOP_REQUIRE_SUITES=1`, as in CI). Each test works in a schema of its own, created for
//! it and dropped after it, so the tests run in parallel and leave nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[cfg(not(feature = "postgres"))]
#[test]
fn postgres_suite_needs_the_feature() {
    agentloop_testkit::external::skip_suite(
        "session store on PostgreSQL",
        "agentloop was built without the `postgres` feature",
        "build with --features postgres",
    );
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::any::Any;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Once};
    use std::time::Duration;

    use agentloop::session::{
        Durability, Follower, NewSession, PostgresOptions, PostgresStore, SessionError,
        SessionStore, open_store,
    };
    use agentloop::transcript::Message;

    use crate::store_conformance::{Backend, conformance_suite};

    const URL_ENV: &str = "AGENTLOOP_TEST_POSTGRES_URL";

    /// The server's URL, or `None` after reporting the skip (once per test binary).
    fn url() -> Option<String> {
        static SKIP: Once = Once::new();
        match std::env::var(URL_ENV) {
            Ok(url) if !url.trim().is_empty() => Some(url),
            _ => {
                SKIP.call_once(|| {
                    agentloop_testkit::external::skip_suite(
                        "session store on PostgreSQL",
                        "AGENTLOOP_TEST_POSTGRES_URL is not set",
                        "run .ci/setup-postgres and export the URL it prints, or set it to a \
                         database you may create schemas in",
                    )
                });
                None
            }
        }
    }

    /// What `work` returns from a client of the database at `url` on a connection (and a
    /// runtime) of its own, closed after it.
    fn with_client<T>(url: &str, work: impl AsyncFnOnce(&tokio_postgres::Client) -> T) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap();
            let driver = tokio::spawn(connection);
            let out = work(&client).await;
            drop(client);
            let _ = driver.await;
            out
        })
    }

    /// Runs `sql` on the database at `url` (its own connection).
    pub fn sql(url: &str, sql: &str) {
        with_client(url, async |client| client.batch_execute(sql).await.unwrap());
    }

    /// The first column of the first row of `sql` on the database at `url`, as text.
    fn query_text(url: &str, sql: &str) -> String {
        with_client(url, async |client| {
            client.query_one(sql, &[]).await.unwrap().get(0)
        })
    }

    /// The versions recorded in `schema`'s version table, as `COUNT:MAX`.
    fn schema_versions(url: &str, schema: &str) -> String {
        query_text(
            url,
            &format!(
                "SELECT count(*)::text || ':' || max(version)::text FROM {schema}.schema_version"
            ),
        )
    }

    /// Drops a test's schema (and everything in it) when dropped.
    struct Schema {
        url: String,
        name: String,
    }

    impl Drop for Schema {
        fn drop(&mut self) {
            let drop_it = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
            let url = self.url.clone();
            // Not on a panicking test's thread state: a failure here only leaks a schema.
            let _ = std::thread::spawn(move || sql(&url, &drop_it)).join();
        }
    }

    fn new_schema_name() -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        format!(
            "t_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Spec: the URL and the schema, separated by U+001E.
    const SEP: char = '\u{1e}';

    pub struct Postgres;

    impl Backend for Postgres {
        fn fresh_spec() -> Option<(String, Box<dyn Any>)> {
            let url = url()?;
            let name = new_schema_name();
            let spec = format!("{url}{SEP}{name}");
            Some((spec, Box::new(Schema { url, name })))
        }

        fn open(spec: &str) -> Result<Arc<dyn SessionStore>, SessionError> {
            let (url, schema) = spec.split_once(SEP).unwrap();
            Ok(Arc::new(PostgresStore::open_with(
                url,
                PostgresOptions::default().schema(schema),
            )?))
        }
    }

    conformance_suite!(Postgres);

    /// A fresh store of its own schema, with the URL and schema name.
    fn fresh() -> Option<(PostgresStore, String, String, Box<dyn Any>)> {
        let (spec, cleanup) = Postgres::fresh_spec()?;
        let (url, schema) = spec.split_once(SEP).unwrap();
        let store =
            PostgresStore::open_with(url, PostgresOptions::default().schema(schema)).unwrap();
        Some((store, url.to_owned(), schema.to_owned(), cleanup))
    }

    #[test]
    fn a_schema_from_a_newer_version_is_refused() {
        let Some((store, url, schema, _cleanup)) = fresh() else {
            return;
        };
        assert_eq!(store.schema(), schema);
        drop(store);
        sql(
            &url,
            &format!("UPDATE {schema}.schema_version SET version = 99"),
        );
        match PostgresStore::open_with(&url, PostgresOptions::default().schema(&schema)) {
            Err(SessionError::SchemaTooNew {
                found: 99,
                supported,
            }) => assert_eq!(supported, 2),
            other => panic!("expected SchemaTooNew, got {other:?}"),
        }
    }

    #[test]
    fn migrations_record_one_version_and_reopening_changes_nothing() {
        let Some((store, url, schema, _cleanup)) = fresh() else {
            return;
        };
        store.create(NewSession::new().id("kept")).unwrap();
        let tables = format!(
            "SELECT string_agg(table_name, ',' ORDER BY table_name) FROM \
             information_schema.tables WHERE table_schema = '{schema}'"
        );
        let before = query_text(&url, &tables);
        assert_eq!(
            before,
            "messages,parked_queues,pending_approvals,schema_version,sessions"
        );
        for _ in 0..2 {
            let again =
                PostgresStore::open_with(&url, PostgresOptions::default().schema(&schema)).unwrap();
            assert_eq!(again.info("kept").unwrap().id, "kept");
        }
        assert_eq!(query_text(&url, &tables), before);
        assert_eq!(schema_versions(&url, &schema), "1:2");
    }

    #[test]
    fn a_version_1_schema_upgrades_with_every_session_top_level() {
        use agentloop::session::ParentLink;
        let Some((store, url, schema, _cleanup)) = fresh() else {
            return;
        };
        store.create(NewSession::new().id("old")).unwrap();
        drop(store);
        // Back to version 1: the tables as they were before child sessions.
        sql(
            &url,
            &format!(
                "DROP INDEX {schema}.sessions_by_parent; \
                 ALTER TABLE {schema}.sessions DROP COLUMN parent_id, DROP COLUMN parent_call, \
                 DROP COLUMN parent_agent; UPDATE {schema}.schema_version SET version = 1"
            ),
        );
        let store =
            PostgresStore::open_with(&url, PostgresOptions::default().schema(&schema)).unwrap();
        assert_eq!(store.info("old").unwrap().parent, None);
        let link = ParentLink::new("old", "call-1", "explore");
        store
            .create(NewSession::new().id("child").parent(link.clone()))
            .unwrap();
        assert_eq!(store.info("child").unwrap().parent, Some(link));
        assert_eq!(schema_versions(&url, &schema), "1:2");
    }

    #[test]
    fn a_damaged_message_is_reported_not_skipped() {
        let Some((store, url, schema, _cleanup)) = fresh() else {
            return;
        };
        let s = store.create(NewSession::new()).unwrap();
        store.append(&s.id, &Message::user("fine")).unwrap();
        store.append(&s.id, &Message::user("damaged")).unwrap();
        sql(
            &url,
            &format!("UPDATE {schema}.messages SET json = '{{not json' WHERE seq = 2"),
        );
        assert!(matches!(
            store.load(&s.id),
            Err(SessionError::Corrupt { seq: 2, .. })
        ));
    }

    /// `url` with its password replaced by `password`.
    fn with_password(url: &str, password: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (userinfo, host) = rest.split_once('@').unwrap();
        let user = userinfo.split(':').next().unwrap();
        format!("{scheme}://{user}:{password}@{host}")
    }

    #[test]
    fn errors_never_show_the_password() {
        let Some(url) = url() else { return };
        let wrong = with_password(&url, "not-the-Secret-42");
        let text = match open_store(&wrong) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a wrong password was accepted"),
        };
        assert!(text.contains("postgresql"), "{text}");
        assert!(text.contains("password authentication failed"), "{text}");
        assert!(!text.contains("not-the-Secret-42"), "{text}");
        let closed = "postgres://me:Secret-43@127.0.0.1:1/db";
        let text = match open_store(closed) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("connected to port 1"),
        };
        assert!(!text.contains("Secret-43"), "{text}");
        assert!(text.contains("me:***@127.0.0.1:1"), "{text}");
    }

    #[test]
    fn a_postgres_url_opens_a_postgres_store() {
        let Some((store, url, schema, _cleanup)) = fresh() else {
            return;
        };
        store.create(NewSession::new().id("via-url")).unwrap();
        // The connection's own search_path chooses the schema.
        let spec = format!("{url}?options=-c%20search_path%3D{schema}");
        let opened = open_store(&spec).unwrap();
        assert_eq!(opened.info("via-url").unwrap().id, "via-url");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_store_works_inside_a_single_threaded_runtime() {
        // The CLI calls the store from its current-thread runtime's only thread: the store's
        // own runtime does the work, so this neither panics nor deadlocks.
        let Some((store, _url, _schema, _cleanup)) = fresh() else {
            return;
        };
        let s = store
            .create_with(NewSession::new(), &[Message::user("hi")])
            .unwrap();
        assert_eq!(store.append(&s.id, &Message::user("again")).unwrap(), 2);
        let lock = store.lock_session(&s.id, Duration::ZERO).unwrap();
        drop(lock);
        let copy = store.clone();
        let id = s.id.clone();
        let loaded = tokio::task::spawn_blocking(move || copy.load_raw(&id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(loaded.len(), 2);
        drop(store); // dropped inside the runtime: fine too
    }

    #[test]
    fn a_follower_is_woken_by_the_append_notification() {
        let Some((store, _url, _schema, _cleanup)) = fresh() else {
            return;
        };
        let store: Arc<dyn SessionStore> = Arc::new(store);
        let s = store.create(NewSession::new()).unwrap();
        let mut follower = Follower::new(store.clone(), &s.id, 0).unwrap();
        assert!(follower.is_signalled());
        // The store's own change signal, as the follower has: `wait` answers true only for a
        // notification (false once its time is up, which here is far past the once-a-second
        // re-read), so each append's NOTIFY is what wakes a follower.
        let mut signal = store
            .subscribe(&s.id)
            .unwrap()
            .expect("the PostgreSQL store signals changes");
        for i in 0..5 {
            store
                .append(&s.id, &Message::user(format!("m{i}")))
                .unwrap();
            assert!(
                signal.wait(Duration::from_secs(30)),
                "no notification for append {i}"
            );
            let batch = follower.next_batch(Duration::from_secs(10)).unwrap();
            assert_eq!(batch.len(), 1);
        }
    }

    #[test]
    fn process_crash_durability_is_accepted() {
        let Some((_store, url, schema, _cleanup)) = fresh() else {
            return;
        };
        let store = PostgresStore::open_with(
            &url,
            PostgresOptions::default()
                .schema(&schema)
                .durability(Durability::ProcessCrash)
                .pool_size(1),
        )
        .unwrap();
        let s = store.create(NewSession::new()).unwrap();
        assert_eq!(store.append(&s.id, &Message::user("x")).unwrap(), 1);
        assert_eq!(store.options().durability, Durability::ProcessCrash);
    }
}
