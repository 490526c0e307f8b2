//! Reading doc comments (`///`, `/** */`, `#[doc = "..."]`) as the text a model reads.

use syn::{Attribute, Expr, ExprLit, Lit, Meta};

/// Whether an attribute is a doc comment (`///` or `#[doc = ...]`).
pub(crate) fn is_doc(attr: &Attribute) -> bool {
    attr.path().is_ident("doc")
}

/// The text of the doc comments among `attrs`: one line per `///` line, with the single space
/// after `///` removed, leading and trailing blank lines dropped. `Ok(None)` when there is no doc
/// text at all. Fails on `#[doc = some_macro!(..)]`, whose text is not known at expansion time.
pub(crate) fn doc_text(attrs: &[Attribute]) -> syn::Result<Option<String>> {
    let mut lines: Vec<String> = Vec::new();
    for attr in attrs.iter().filter(|a| is_doc(a)) {
        let Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => {
                let value = s.value();
                for line in value.lines() {
                    lines.push(line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned());
                }
                if value.is_empty() {
                    lines.push(String::new());
                }
            }
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "#[tool] reads doc comments at compile time and needs them as literal text \
                     (`/// ...` or `#[doc = \"...\"]`)",
                ));
            }
        }
    }
    let text = lines.join("\n");
    let text = text.trim_matches('\n').trim_end();
    Ok((!text.trim().is_empty()).then(|| text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn attrs(item: syn::ItemFn) -> Vec<Attribute> {
        item.attrs
    }

    #[test]
    fn lines_are_joined_without_the_leading_space() {
        let item: syn::ItemFn = parse_quote! {
            /// Read a file.
            ///
            /// Returns its text.
            #[inline]
            fn f() {}
        };
        assert_eq!(
            doc_text(&attrs(item)).ok().flatten().as_deref(),
            Some("Read a file.\n\nReturns its text.")
        );
    }

    #[test]
    fn no_doc_or_blank_doc_is_none() {
        let item: syn::ItemFn = parse_quote! { fn f() {} };
        assert_eq!(doc_text(&attrs(item)).ok(), Some(None));
        let item: syn::ItemFn = parse_quote! {
            ///
            ///
            fn f() {}
        };
        assert_eq!(doc_text(&attrs(item)).ok(), Some(None));
    }

    #[test]
    fn non_literal_docs_are_refused() {
        let item: syn::ItemFn = parse_quote! {
            #[doc = include_str!("x.md")]
            fn f() {}
        };
        assert!(doc_text(&attrs(item)).is_err());
    }
}
