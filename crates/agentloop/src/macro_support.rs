//! Support code for the expansion of `#[tool]` (see [`crate::tool`]). Not a public API: names
//! here may change in any release. It owns schema generation settings and the conversion of a
//! tool function's return value; it must not hold anything applications call directly.

use schemars::JsonSchema;
use serde_json::Value;

use crate::tooling::{ToolSpec, ToolSpecBuilder};

pub use serde;

/// The JSON Schema of a tool's argument struct: self-contained (subschemas inlined; only
/// recursive types keep `$defs`), without the `$schema` and `title` noise at the top level, and
/// always with a `properties` object.
pub fn parameters_schema<T: JsonSchema>() -> Value {
    let mut schema = crate::json::schema::inlined_schema::<T>();
    if let Some(object) = schema.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
        object
            .entry("properties")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
    schema
}

/// Builds a spec whose parts the macro checked at compile time.
pub fn finish<D: Send + Sync + 'static>(builder: ToolSpecBuilder<D>) -> ToolSpec<D> {
    match builder.build() {
        Ok(spec) => spec,
        // The macro verified the name and the non-empty description at compile time, always sets
        // a handler, and a derived argument struct always has an object schema: `build` has no
        // failure left to report.
        Err(e) => unreachable!("#[tool] produced a tool that does not build: {e}"),
    }
}

/// Conversion of a tool function's return value, chosen at compile time by autoref
/// specialisation (the most specific rule wins):
///
/// 1. anything that is [`IntoToolOutput`](crate::tooling::IntoToolOutput) (`String`, `ToolOutput`, `Value`, `()`,
///    `Result<String, E: Into<ToolError>>`…): as is;
/// 2. `Result<T: Serialize, E: Into<ToolError>>`: `Ok` as JSON;
/// 3. `Result<T: IntoToolOutput, E: Display>`: `Err` as its text;
/// 4. `Result<T: Serialize, E: Display>`: `Ok` as JSON, `Err` as its text;
/// 5. any `T: Serialize`: JSON (strings unquoted, as in the tool contract's `serialize_result`).
pub mod returns {
    use std::fmt::Display;
    use std::marker::PhantomData;

    use serde::Serialize;

    use crate::tooling::{IntoToolOutput, Json, ToolError, ToolOutput};

    /// Carries the return type for method resolution; holds no value.
    pub struct Probe<T>(PhantomData<fn() -> T>);

    impl<T> Probe<T> {
        /// A probe for the type of `value`.
        pub fn of(_value: &T) -> Self {
            Probe(PhantomData)
        }
    }

    /// Declares rule `$n`: its marker type, whose `convert` the expansion calls, and the trait
    /// whose method returns it. The expansion calls that method on a `Probe` behind references;
    /// which trait it resolves to (each is implemented for a different number of `&`, below) is
    /// the choice of rule. The traits differ in nothing else, so they are declared here once.
    macro_rules! rule {
        ($n:literal, $kind:ident, $via:ident $(, $more:literal)?) => {
            #[doc = concat!("Rule ", $n $(, " ", $more)?, ".")]
            pub struct $kind;
            #[doc = concat!("Selects rule ", $n, ".")]
            pub trait $via {
                /// The rule.
                fn tool_return_kind(&self) -> $kind {
                    $kind
                }
            }
        };
    }

    rule!(1, OutputKind, ViaOutput);
    impl OutputKind {
        /// Converts.
        pub fn convert<T: IntoToolOutput>(self, value: T) -> Result<ToolOutput, ToolError> {
            value.into_tool_output()
        }
    }
    impl<T: IntoToolOutput> ViaOutput for &&&&Probe<T> {}

    rule!(2, ResultSerializeKind, ViaResultSerialize);
    impl ResultSerializeKind {
        /// Converts.
        pub fn convert<T: Serialize, E: Into<ToolError>>(
            self,
            value: Result<T, E>,
        ) -> Result<ToolOutput, ToolError> {
            Json(value.map_err(Into::into)?).into_tool_output()
        }
    }
    impl<T: Serialize, E: Into<ToolError>> ViaResultSerialize for &&&Probe<Result<T, E>> {}

    rule!(3, ResultOutputDisplayKind, ViaResultOutputDisplay);
    impl ResultOutputDisplayKind {
        /// Converts.
        pub fn convert<T: IntoToolOutput, E: Display>(
            self,
            value: Result<T, E>,
        ) -> Result<ToolOutput, ToolError> {
            value
                .map_err(|e| ToolError::new(e.to_string()))?
                .into_tool_output()
        }
    }
    impl<T: IntoToolOutput, E: Display> ViaResultOutputDisplay for &&Probe<Result<T, E>> {}

    rule!(4, ResultSerializeDisplayKind, ViaResultSerializeDisplay);
    impl ResultSerializeDisplayKind {
        /// Converts.
        pub fn convert<T: Serialize, E: Display>(
            self,
            value: Result<T, E>,
        ) -> Result<ToolOutput, ToolError> {
            Json(value.map_err(|e| ToolError::new(e.to_string()))?).into_tool_output()
        }
    }
    impl<T: Serialize, E: Display> ViaResultSerializeDisplay for &Probe<Result<T, E>> {}

    rule!(
        5,
        SerializeKind,
        ViaSerialize,
        "(the fallback: also where an unsupported type is reported)"
    );
    impl SerializeKind {
        /// Converts.
        pub fn convert<T: ToolReturn>(self, value: T) -> Result<ToolOutput, ToolError> {
            Json(value).into_tool_output()
        }
    }
    impl<T> ViaSerialize for Probe<T> {}

    /// What a `#[tool]` function may return when no more specific rule applies.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be returned from a #[tool] function",
        label = "this return type is neither a tool output nor `serde::Serialize`",
        note = "return `String`, a type that implements `serde::Serialize`, or `Result<T, E>` \
                where `E: Into<ToolError>` or `E: Display`"
    )]
    pub trait ToolReturn: Serialize {}
    impl<T: Serialize> ToolReturn for T {}
}
