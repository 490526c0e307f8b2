//! `#[tool]`: turn a Rust function into an agentloop tool; `#[schema]`: derive the JSON Schema of
//! an argument or output type through agentloop's own `schemars`; `#[derive(ToolDeps)]`: a deps
//! bundle without approval logic. Use them through `agentloop::{tool, schema, ToolDeps}`; this
//! crate is an implementation detail of `agentloop` and its generated code refers to `::agentloop`.
//!
//! The macro only reads syntax and emits code; everything it can check (doc comments, argument
//! patterns, option values, the tool name) it checks at compile time, so the generated constructor
//! never fails at run time.

mod docs;
mod expand;
mod options;
#[cfg(test)]
mod ui_tests;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;

/// Turns a function into an agentloop tool: the doc comment becomes the description, each
/// argument becomes a property of the JSON Schema, and a `<fn>_tool()` constructor returns the
/// `agentloop::tooling::ToolSpec`.
///
/// ```
/// use agentloop::tool;
/// use agentloop::tooling::{Deps, ToolSpec};
///
/// /// Add two integers.
/// #[tool]
/// fn add(
///     /// The first addend.
///     a: i64,
///     /// The second addend.
///     b: i64,
/// ) -> i64 {
///     a + b
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// assert_eq!(add(2, 3), 5); // the function stays callable as written
/// let spec: ToolSpec<Deps> = add_tool();
/// assert_eq!(spec.name(), "add");
/// assert_eq!(spec.description(), "Add two integers.");
/// assert_eq!(spec.parameters()["required"], serde_json::json!(["a", "b"]));
/// assert_eq!(
///     spec.parameters()["properties"]["a"]["description"],
///     "The first addend."
/// );
/// // A direct call from Rust goes through the same schema validation as the executor.
/// let out = spec.call(std::sync::Arc::new(Deps::new()), serde_json::json!({"a": 2, "b": 3})).await;
/// assert_eq!(out.unwrap().content, "5");
/// # }
/// ```
///
/// # What it generates
///
/// The function is emitted unchanged (argument doc comments and `#[serde]` / `#[schemars]`
/// argument attributes are moved to the schema), and next to it, with the same visibility:
///
/// ```text
/// fn <fn>_tool<D: ToolDeps>() -> ToolSpec<D>      // no context argument: any deps bundle
/// fn <fn>_tool() -> ToolSpec<MyDeps>              // first argument `ctx: ToolContext<MyDeps>`
/// fn <fn>_tool<D: ToolDeps>() -> ToolSpec<D>      // `fn f<D: ToolDeps>(ctx: ToolContext<D>, ..)`
/// ```
///
/// Register the spec (`Registry::new([read_file_tool()])`) or call it directly with
/// `ToolSpec::call(deps, json)`, which validates the arguments against the schema exactly as the
/// executor does (the tool contract's `__call__`).
///
/// # The function
///
/// - **Doc comment** (required): the tool's description. A `///` comment on an argument becomes
///   that property's `description`; types get theirs from their own doc comments through
///   `schemars` (nested structs and enums included).
/// - **Arguments**: plain `name: Type` pairs, where `Type: serde::Deserialize +
///   schemars::JsonSchema` and is owned (`String`, not `&str`). `Option<T>` arguments are optional
///   (left out of `required`); every other argument is required; unknown properties are refused
///   (`additionalProperties: false`). `#[schemars(range(min = 1, max = 10))]`,
///   `#[schemars(length(max = 80))]`, `#[serde(default)]`, `#[serde(rename = "..")]` and the like
///   may be put on an argument.
/// - **Context**: an optional *first* argument `ctx: ToolContext<MyDeps>` receives the call's
///   context (the deps bundle through `Deref`, the call id, cancellation, progress). It is never
///   part of the schema. Without it, the tool works with any deps bundle.
/// - **Sync or async**: a plain `fn` runs on Tokio's blocking pool (so it may block or sleep
///   without stalling other tools); an `async fn` is awaited (its future must be `Send`).
/// - **Return value**: `String` (and `&'static str`, `ToolOutput`, `serde_json::Value`) passes
///   unchanged; any other `Serialize` value becomes compact JSON (a string result is not quoted);
///   `Result<T, E>` makes `Err` an error result, with `E: Into<ToolError>` kept as is and any
///   other `E: Display` turned into its text.
///
/// # Options
///
/// ```text
/// #[tool(
///     name = "read_file",          // model-visible name (default: the function's name)
///     parallel_safe = false,       // a batch calling it runs sequentially
///     timeout = "30s",             // or "500ms", "2m", or a number of seconds: timeout = 30
///     guidelines = ["Use absolute paths."],   // rendered into the tool-guidance section
///     snippet = "read_file({\"path\": \"/etc/hosts\"})",
///     deferred,                    // hidden until a tool search loads it
///     local_tool_search,           // this tool answers client-side tool searches
///     requires_approval,           // calls need a decision first (ToolDeps::approve; by
///                                  // default deferred for a person: the run parks)
/// )]
/// ```
///
/// # Compile-time errors
///
/// A missing doc comment, a `self` receiver, generics (other than the deps type of the context), a
/// destructuring or `ref` argument pattern, a reference argument type, an unknown or repeated
/// option, a tool name providers refuse and a malformed timeout are all compile errors pointing at
/// the offending token (the cases are in `tests/ui/`). So is a return type that is not a tool
/// output:
///
/// ```compile_fail,E0277
/// struct Opaque;
///
/// /// Make something that cannot be serialized.
/// #[agentloop::tool]
/// fn make() -> Opaque {
///     Opaque
/// }
/// ```
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool_tokens(attr.into(), item.into()).into()
}

/// [`tool`] on `proc_macro2` tokens (which the compile-error tests call directly).
fn tool_tokens(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut options = options::ToolOptions::default();
    let parser = syn::meta::parser(|meta| options.parse_one(meta));
    if let Err(e) = syn::parse::Parser::parse2(parser, attr) {
        return e.to_compile_error();
    }
    let func = match syn::parse2::<syn::ItemFn>(item) {
        Ok(f) => f,
        Err(e) => {
            return syn::Error::new(e.span(), "#[tool] goes on a function (`fn` or `async fn`)")
                .to_compile_error();
        }
    };
    let fallback = expand::strip_argument_attributes(func.clone());
    match expand::expand(options, func) {
        Ok(tokens) => tokens,
        Err(e) => {
            // Keep the function itself so the only error the user sees is ours, not a cascade of
            // "cannot find function" errors at every use.
            let mut tokens = e.to_compile_error();
            quote::ToTokens::to_tokens(&fallback, &mut tokens);
            tokens
        }
    }
}

/// Derives `JsonSchema` for a tool argument type or a typed-output type through agentloop's
/// re-exported `schemars`, so a crate that depends on `agentloop` (and `serde`) needs no
/// `schemars` dependency of its own. Put it above the `#[derive(..)]` line:
///
/// ```
/// use serde::Deserialize;
///
/// /// A support ticket's priority.
/// #[agentloop::schema]
/// #[derive(Deserialize)]
/// #[serde(rename_all = "snake_case")]
/// enum Priority { Low, High }
///
/// let schema = agentloop::output::output_schema::<Priority>();
/// assert_eq!(schema["enum"], serde_json::json!(["low", "high"]));
/// ```
///
/// It expands to `#[derive(agentloop::JsonSchema)]` plus
/// `#[schemars(crate = "agentloop::schemars")]` (the path the derive's generated code needs);
/// `#[serde]` and `#[schemars]` attributes on the type and its fields work as usual. It takes no
/// arguments and goes on a struct or an enum.
#[proc_macro_attribute]
pub fn schema(attr: TokenStream, item: TokenStream) -> TokenStream {
    schema_tokens(attr.into(), item.into()).into()
}

/// [`schema`] on `proc_macro2` tokens (which the compile-error tests call directly).
fn schema_tokens(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    if !attr.is_empty() {
        return syn::Error::new_spanned(attr, "#[agentloop::schema] takes no arguments")
            .to_compile_error();
    }
    let input = match syn::parse2::<syn::DeriveInput>(item) {
        Ok(input) => input,
        Err(e) => {
            return syn::Error::new(
                e.span(),
                "#[agentloop::schema] goes on a struct or an enum (the type of a tool's \
                 arguments or of a typed output)",
            )
            .to_compile_error();
        }
    };
    if let syn::Data::Union(u) = &input.data {
        return syn::Error::new(
            u.union_token.span,
            "#[agentloop::schema] goes on a struct or an enum, not a union",
        )
        .to_compile_error();
    }
    quote::quote! {
        #[derive(::agentloop::JsonSchema)]
        #[schemars(crate = "::agentloop::schemars")]
        #input
    }
}

/// Implements `agentloop::tooling::ToolDeps` with its defaults (every call allowed, except
/// those of tools that require approval, which are deferred): for a deps bundle that only
/// carries what the tools use.
///
/// ```
/// use std::sync::Arc;
/// use agentloop::agent::{AgentLoop, AgentLoopConfig};
/// use agentloop::model::ScriptedModel;
///
/// #[derive(agentloop::ToolDeps)]
/// struct Shop {
///     currency: &'static str,
/// }
///
/// let deps = Arc::new(Shop { currency: "EUR" });
/// let agent = AgentLoop::with_deps(AgentLoopConfig::default(), ScriptedModel::new([]), deps);
/// # let _ = agent;
/// ```
#[proc_macro_derive(ToolDeps)]
pub fn derive_tool_deps(item: TokenStream) -> TokenStream {
    let input = match syn::parse::<syn::DeriveInput>(item) {
        Ok(input) => input,
        Err(e) => return e.to_compile_error().into(),
    };
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote::quote! {
        impl #impl_generics ::agentloop::tooling::ToolDeps for #name #ty_generics #where_clause {}
    }
    .into()
}
