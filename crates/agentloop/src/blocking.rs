//! A synchronous view over the async API (work in progress).
