//! The one shape of a by-value builder setter, written once. Many option and request types here
//! (and in the companion crates) offer `fn x(mut self, v: T) -> Self { self.x = v; self }`
//! methods; `setters!` generates them from one line each, so a type's list of
//! setters reads as a table of what each one stores. Not a public API: it is exported only so the
//! companion crates can use it, and may change in any release.

/// Generates by-value builder setters inside an `impl` block.
///
/// Each entry reads `pub fn NAME(ARGS) => FIELD = VALUE;` and becomes
/// `pub fn NAME(mut self, ARGS) -> Self { self.FIELD = VALUE; self }`, keeping the entry's
/// attributes (its doc comment, `#[must_use]`, …), so the generated method documents exactly as
/// a hand-written one:
///
/// ```
/// # #[derive(Default)]
/// # pub struct Request { pub title: Option<String>, pub limit: usize }
/// impl Request {
///     agentloop::setters! {
///         /// Sets the title.
///         pub fn title(title: impl Into<String>) => title = Some(title.into());
///         /// Sets the limit.
///         pub fn limit(n: usize) => limit = n;
///     }
/// }
/// let r = Request::default().title("t").limit(3);
/// assert_eq!((r.title.as_deref(), r.limit), (Some("t"), 3));
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),+) => $field:ident = $value:expr;
    )*) => {
        $(
            $(#[$attr])*
            $vis fn $name(mut self, $($arg: $ty),+) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}
