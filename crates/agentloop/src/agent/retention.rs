//! The loop's side of output retention: an [`Extension`] that cuts every over-long tool result
//! to its head and tail and keeps the whole of it in an [`OutputStore`]. It lives here, not
//! beside the store, because the built-in tools sit below the loop and must not import it.

use super::{Extension, ResultRewrite};
use crate::builtin::OutputStore;

impl OutputStore {
    /// An extension that truncates every tool result longer than
    /// [`OUTPUT_LIMIT`](crate::builtin::OUTPUT_LIMIT) (head and tail kept, with the note) and
    /// keeps its full text here. Results a built-in tool already truncated are within the
    /// limit and pass unchanged.
    pub fn extension(&self) -> Extension {
        let store = self.clone();
        Extension::new("output-retention").on_tool_result(move |done| {
            let shown = store.cut_and_keep(&done.id, &done.result.content)?;
            Some(ResultRewrite {
                content: Some(shown),
                is_error: None,
            })
        })
    }
}
