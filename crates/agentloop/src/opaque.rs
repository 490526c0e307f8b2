//! A field wrapper for values with nothing to show in `Debug` (callbacks, parse functions), so
//! the private structs that hold them can derive `Debug` instead of listing their other fields by
//! hand in a manual implementation.

use std::fmt;
use std::ops::Deref;

/// A value whose `Debug` output is only `..`; it derefs to the value. Wrap a private field in it
/// when the field's type has no `Debug` (a closure, a `dyn Fn`) and the struct should derive it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Opaque<T>(pub(crate) T);

impl<T> fmt::Debug for Opaque<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("..")
    }
}

impl<T> Deref for Opaque<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Opaque;

    #[test]
    fn prints_a_placeholder_and_derefs_to_the_value() {
        let f = Opaque(|x: u32| x + 1);
        assert_eq!(format!("{:?}", Some(Opaque(&f))), "Some(..)");
        assert_eq!(f(1), 2);
    }
}
