//! [`Durability`]: what a successful append survives, for every store.

/// What a successful append survives.
///
/// For [`SqliteStore`](super::SqliteStore) both settings use SQLite's WAL journal; they differ
/// in when SQLite calls `fsync`. For the PostgreSQL store see its options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// `synchronous=NORMAL` (the default). A commit writes the transaction to the WAL file
    /// before `append` returns, so the message survives the process crashing, panicking or
    /// being killed (`SIGKILL`): the data is in the operating system's page cache. It does not
    /// `fsync` on every commit, only at checkpoints, so an OS crash or power loss can lose the
    /// last transactions (never corrupt the database). This is the failure that actually
    /// happens to agent runs (Ctrl-C, OOM killer, a crashed terminal), and an append costs no
    /// disk flush: about 0.2 ms against about 3 ms with [`PowerLoss`](Durability::PowerLoss)
    /// (the `sessions` benchmark on the project's 2-core VM).
    #[default]
    ProcessCrash,
    /// `synchronous=FULL`: the WAL is `fsync`ed on every commit, so an appended message also
    /// survives power loss and OS crashes. Costs one disk flush per append (about 3 ms on the
    /// project's VM disk; more on slow disks and network filesystems), paid on the agent's
    /// task for every completed message.
    PowerLoss,
}
