//! The expansion of `#[tool]`: checks the function, then emits it unchanged (minus the argument
//! attributes only the macro understands) next to a `<fn>_tool()` constructor for its `ToolSpec`.
//!
//! The schema comes from a hidden argument struct that derives `serde::Deserialize` and
//! `schemars::JsonSchema`, one field per argument (docs and `#[serde]` / `#[schemars]` attributes
//! forwarded), so binding the model's arguments and describing them are the same type: the schema
//! can never disagree with what the handler accepts.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, GenericArgument, GenericParam, Ident, ItemFn, Pat, PathArguments, ReturnType,
    Type,
};

use crate::docs::{doc_text, is_doc};
use crate::options::{ToolOptions, check_name};

/// One model-visible argument.
struct Arg {
    ident: Ident,
    ty: Type,
    /// Doc comments and `#[serde]` / `#[schemars]` attributes, moved to the argument struct.
    forwarded: Vec<Attribute>,
}

/// How the spec constructor is generic (or not) over the deps bundle.
enum DepsMode {
    /// No context argument: the tool works with any `D: ToolDeps`.
    AnyDeps,
    /// `ToolContext<ConcreteDeps>`.
    Concrete(Type),
    /// `fn f<D: Bounds>(ctx: ToolContext<D>, ..)`: the constructor keeps the function's generics.
    Generic(Ident),
}

pub(crate) fn expand(options: ToolOptions, mut func: ItemFn) -> syn::Result<TokenStream> {
    check_signature(&func)?;
    let description = doc_text(&func.attrs)?.ok_or_else(|| {
        syn::Error::new(
            func.sig.ident.span(),
            format!(
                "#[tool] needs a doc comment on `fn {}`: it becomes the tool's description, which \
                 the model chooses tools by. Add `/// What the tool does.` above the function",
                func.sig.ident
            ),
        )
    })?;

    let fn_ident = func.sig.ident.clone();
    let name = match &options.name {
        Some(lit) => lit.value(),
        None => {
            let name = fn_ident.unraw().to_string();
            check_name(&name, fn_ident.span())?;
            name
        }
    };

    let (context_deps, args) = split_arguments(&mut func)?;
    let deps_mode = deps_mode(&func, context_deps, &args)?;

    let vis = &func.vis;
    let ctor_ident = format_ident!("{}_tool", fn_ident.unraw());
    let args_struct = Ident::new("AgentloopToolArgs", Span::mixed_site());
    let ctx_var = Ident::new("agentloop_ctx", Span::mixed_site());
    let args_var = Ident::new("agentloop_args", Span::mixed_site());

    let mut params = func.sig.generics.params.clone();
    let mut where_clause =
        func.sig
            .generics
            .where_clause
            .clone()
            .unwrap_or_else(|| syn::WhereClause {
                where_token: Default::default(),
                predicates: Default::default(),
            });
    let (ctor_generics, deps_ty, fn_path) = match &deps_mode {
        DepsMode::AnyDeps => (
            quote!(<D: ::agentloop::tooling::ToolDeps>),
            quote!(D),
            quote!(#fn_ident),
        ),
        DepsMode::Concrete(ty) => (quote!(), quote!(#ty), quote!(#fn_ident)),
        DepsMode::Generic(param) => {
            // Add what a spec needs (`Send + Sync + 'static`) where the function already bounds
            // the parameter (its `where` clause or its declaration), never in both places.
            let extra: [syn::TypeParamBound; 3] = [
                syn::parse_quote!(::core::marker::Send),
                syn::parse_quote!(::core::marker::Sync),
                syn::parse_quote!('static),
            ];
            let in_where = where_clause.predicates.iter_mut().find_map(|p| match p {
                syn::WherePredicate::Type(t) if is_param(&t.bounded_ty, param) => Some(t),
                _ => None,
            });
            match in_where {
                Some(predicate) => predicate.bounds.extend(extra),
                None => {
                    for p in params.iter_mut() {
                        if let GenericParam::Type(t) = p {
                            if t.colon_token.is_none() {
                                t.colon_token = Some(Default::default());
                            }
                            t.bounds.extend(extra.clone());
                        }
                    }
                }
            }
            (
                quote!(<#params>),
                quote!(#param),
                quote!(#fn_ident::<#param>),
            )
        }
    };

    let where_tokens = (!where_clause.predicates.is_empty()).then_some(&where_clause);

    let fields = args.iter().map(|a| {
        let Arg {
            ident,
            ty,
            forwarded,
        } = a;
        quote!(#(#forwarded)* #ident: #ty)
    });
    let idents: Vec<&Ident> = args.iter().map(|a| &a.ident).collect();
    let has_context = !matches!(deps_mode, DepsMode::AnyDeps);
    let call_args = if has_context {
        quote!(#ctx_var, #(#idents),*)
    } else {
        quote!(#(#idents),*)
    };
    let ctx_param = if has_context {
        quote!(#ctx_var)
    } else {
        quote!(_)
    };

    let ret_span = match &func.sig.output {
        ReturnType::Default => func.sig.ident.span(),
        ReturnType::Type(_, ty) => ty.span(),
    };
    let ret_var = Ident::new("agentloop_ret", Span::mixed_site());
    let convert = quote_spanned! {ret_span=>
        {
            #[allow(unused_imports)]
            use ::agentloop::macro_support::returns::{
                ViaOutput as _, ViaResultOutputDisplay as _, ViaResultSerialize as _,
                ViaResultSerializeDisplay as _, ViaSerialize as _,
            };
            // The braces around the argument carry the return type's span, so an unsupported
            // return type is reported there rather than at `#[tool]`.
            #[allow(unused_braces)]
            let output = (&&&&&::agentloop::macro_support::returns::Probe::of(&#ret_var))
                .tool_return_kind()
                .convert({ #ret_var });
            output
        }
    };

    let handler = if func.sig.asyncness.is_some() {
        quote! {
            .handler(|#ctx_param: ::agentloop::tooling::ToolContext<#deps_ty>, #args_var: #args_struct| async move {
                let #args_struct { #(#idents),* } = #args_var;
                let #ret_var = #fn_path(#call_args).await;
                #convert
            })
        }
    } else {
        quote! {
            .blocking_handler(|#ctx_param: ::agentloop::tooling::ToolContext<#deps_ty>, #args_var: #args_struct| {
                let #args_struct { #(#idents),* } = #args_var;
                let #ret_var = #fn_path(#call_args);
                #convert
            })
        }
    };

    let guidelines = options.guidelines.iter().map(|g| quote!(.guideline(#g)));
    let snippet = options.snippet.as_ref().map(|s| quote!(.snippet(#s)));
    let parallel_safe = options.parallel_safe.map(|p| quote!(.parallel_safe(#p)));
    let timeout = options
        .timeout_ms
        .map(|ms| quote!(.timeout(::core::time::Duration::from_millis(#ms))));
    let deferred = options.deferred.then(|| quote!(.deferred(true)));
    let local_tool_search = options
        .local_tool_search
        .then(|| quote!(.local_tool_search(true)));
    let requires_approval = options
        .requires_approval
        .then(|| quote!(.requires_approval(true)));

    let ctor_doc = format!(
        "Builds the `{name}` tool from [`{fn_ident}`] (generated by `#[tool]`): its description, \
         the JSON Schema of its arguments and a handler that calls the function.\n\n\
         Register it (`Registry::new([{ctor_ident}()])`) or call it directly with \
         `{ctor_ident}().call(deps, json_args).await`."
    );

    Ok(quote! {
        #func

        #[doc = #ctor_doc]
        #vis fn #ctor_ident #ctor_generics () -> ::agentloop::tooling::ToolSpec<#deps_ty> #where_tokens {
            #[derive(::agentloop::macro_support::serde::Deserialize, ::agentloop::schemars::JsonSchema)]
            #[serde(crate = "::agentloop::macro_support::serde", deny_unknown_fields)]
            #[schemars(crate = "::agentloop::schemars")]
            struct #args_struct {
                #(#fields,)*
            }

            let builder = ::agentloop::tooling::ToolSpec::<#deps_ty>::builder(#name, #description)
                .parameters(::agentloop::macro_support::parameters_schema::<#args_struct>())
                #handler
                #(#guidelines)*
                #snippet
                #parallel_safe
                #timeout
                #deferred
                #local_tool_search
                #requires_approval;
            ::agentloop::macro_support::finish(builder)
        }
    })
}

/// The function without the argument attributes only the macro understands (used to keep the
/// function in the output when the expansion fails).
pub(crate) fn strip_argument_attributes(mut func: ItemFn) -> ItemFn {
    for input in func.sig.inputs.iter_mut() {
        if let FnArg::Typed(pat_type) = input {
            pat_type.attrs.retain(|a| {
                !(is_doc(a) || a.path().is_ident("serde") || a.path().is_ident("schemars"))
            });
        }
    }
    func
}

/// Refuses what a tool function cannot be: a method, `unsafe`, `extern`, variadic.
fn check_signature(func: &ItemFn) -> syn::Result<()> {
    let sig = &func.sig;
    if let Some(receiver) = sig.receiver() {
        return Err(syn::Error::new_spanned(
            receiver,
            "#[tool] cannot be used on a method: `self` is not something the model can pass. \
             Write a free function and reach shared state through a first `ToolContext<MyDeps>` \
             argument",
        ));
    }
    if let Some(unsafety) = &sig.unsafety {
        return Err(syn::Error::new_spanned(
            unsafety,
            "#[tool] functions cannot be `unsafe`: the model calls them",
        ));
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new_spanned(
            abi,
            "#[tool] functions cannot have an `extern` ABI",
        ));
    }
    if let Some(variadic) = &sig.variadic {
        return Err(syn::Error::new_spanned(
            variadic,
            "#[tool] functions cannot be variadic",
        ));
    }
    Ok(())
}

/// Splits the inputs into the optional context (its deps type) and the model-visible arguments,
/// and removes from the function the argument attributes that only the macro understands.
fn split_arguments(func: &mut ItemFn) -> syn::Result<(Option<Type>, Vec<Arg>)> {
    let mut context = None;
    let mut args = Vec::new();
    for (index, input) in func.sig.inputs.iter_mut().enumerate() {
        let FnArg::Typed(pat_type) = input else {
            continue; // receivers were refused by check_signature
        };
        if let Some(deps) = context_deps(&pat_type.ty)? {
            if index != 0 {
                return Err(syn::Error::new_spanned(
                    &pat_type.ty,
                    "the `ToolContext` argument must come first",
                ));
            }
            pat_type.attrs.retain(|a| !is_doc(a));
            context = Some(deps);
            continue;
        }
        let ident = match &*pat_type.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "unsupported argument pattern: #[tool] arguments must be plain names \
                     (`name: Type`), because each one becomes a named property of the tool's \
                     JSON Schema",
                ));
            }
        };
        check_argument_type(&pat_type.ty)?;
        let (forwarded, kept): (Vec<Attribute>, Vec<Attribute>) =
            pat_type.attrs.drain(..).partition(|a| {
                is_doc(a) || a.path().is_ident("serde") || a.path().is_ident("schemars")
            });
        if let Some(cfg) = kept
            .iter()
            .find(|a| a.path().is_ident("cfg") || a.path().is_ident("cfg_attr"))
        {
            return Err(syn::Error::new_spanned(
                cfg,
                "#[tool] arguments cannot be conditional: the schema must list the same \
                 arguments the function takes",
            ));
        }
        pat_type.attrs = kept;
        args.push(Arg {
            ident,
            ty: (*pat_type.ty).clone(),
            forwarded,
        });
    }
    Ok((context, args))
}

/// `Some(D)` when `ty` is `ToolContext<D>` (matched by its last path segment).
fn context_deps(ty: &Type) -> syn::Result<Option<Type>> {
    if let Type::Reference(r) = ty {
        if context_deps(&r.elem)?.is_some() {
            return Err(syn::Error::new_spanned(
                ty,
                "take the `ToolContext` by value (`ctx: ToolContext<MyDeps>`); it is cheap to clone",
            ));
        }
        return Ok(None);
    }
    let Type::Path(path) = ty else {
        return Ok(None);
    };
    let Some(last) = path.path.segments.last() else {
        return Ok(None);
    };
    if last.ident != "ToolContext" {
        return Ok(None);
    }
    let missing = || {
        syn::Error::new_spanned(
            ty,
            "`ToolContext` needs its deps type: `ToolContext<MyDeps>` (or `ToolContext<Deps>`)",
        )
    };
    let PathArguments::AngleBracketed(generic) = &last.arguments else {
        return Err(missing());
    };
    let mut types = generic.args.iter().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    });
    match (types.next(), types.next()) {
        (Some(deps), None) => Ok(Some(deps)),
        _ => Err(missing()),
    }
}

/// Arguments are deserialized from JSON, so they must be owned, nameable types.
fn check_argument_type(ty: &Type) -> syn::Result<()> {
    match ty {
        Type::Reference(r) => {
            let is_str = matches!(&*r.elem, Type::Path(p) if p.path.is_ident("str"));
            let hint = if is_str {
                "use `String` instead of `&str`"
            } else {
                "use an owned type instead of a reference"
            };
            Err(syn::Error::new_spanned(
                ty,
                format!("#[tool] arguments are deserialized from the model's JSON: {hint}"),
            ))
        }
        Type::ImplTrait(_) => Err(syn::Error::new_spanned(
            ty,
            "#[tool] arguments need a concrete type (the schema is generated from it), not `impl Trait`",
        )),
        _ => Ok(()),
    }
}

/// Decides how the constructor is generic over the deps bundle, refusing other generics.
fn deps_mode(func: &ItemFn, context: Option<Type>, args: &[Arg]) -> syn::Result<DepsMode> {
    let generics = &func.sig.generics;
    let not_generic = |span: &dyn quote::ToTokens| {
        syn::Error::new_spanned(
            span,
            "#[tool] functions cannot be generic: the JSON Schema is generated at compile time \
             from concrete argument types. The one exception is the deps type of a first \
             `ToolContext<D>` argument (`fn f<D: ToolDeps>(ctx: ToolContext<D>, ..)`)",
        )
    };
    let mut type_params = Vec::new();
    for param in &generics.params {
        match param {
            GenericParam::Type(t) => type_params.push(&t.ident),
            other => return Err(not_generic(other)),
        }
    }
    match (context, type_params.as_slice()) {
        (None, []) => Ok(DepsMode::AnyDeps),
        (Some(deps), []) => Ok(DepsMode::Concrete(deps)),
        (Some(Type::Path(p)), [param]) if p.qself.is_none() && p.path.is_ident(*param) => {
            let param = (*param).clone();
            if let Some(arg) = args.iter().find(|a| mentions(&a.ty, &param)) {
                return Err(syn::Error::new_spanned(
                    &arg.ty,
                    format!(
                        "#[tool] argument types cannot use the deps type parameter `{param}`: \
                         the schema is generated from concrete types"
                    ),
                ));
            }
            Ok(DepsMode::Generic(param))
        }
        _ => Err(not_generic(generics)),
    }
}

/// Whether `ty` is exactly the type parameter `param`.
fn is_param(ty: &Type, param: &Ident) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.is_ident(param))
}

/// Whether `ident` appears anywhere in the tokens of `ty`.
fn mentions(ty: &Type, ident: &Ident) -> bool {
    fn walk(tokens: TokenStream, ident: &Ident) -> bool {
        tokens.into_iter().any(|t| match t {
            TokenTree::Ident(i) => &i == ident,
            TokenTree::Group(g) => walk(g.stream(), ident),
            _ => false,
        })
    }
    walk(quote!(#ty), ident)
}
