//! `#[spargio::main]` and `#[spargio::test]`: run an `async fn` on a fresh
//! spargio runtime.
//!
//! The function body runs on shard 0 (built through
//! `spargio::run_local_on`), so it may hold `!Send` state across awaits; its
//! return value travels back to the calling thread and must be `Send`,
//! except tokio's usual `Result<T, Box<dyn Error>>`, whose error travels
//! back as its text (the same `Debug` and `Display`). It
//! may take a `spargio::RuntimeHandle` parameter. Arguments:
//! `shards = N` (a positive integer literal) and `backend = "auto"`,
//! `"io_uring"` or `"epoll"` (without it: `SPARGIO_BACKEND`, else auto).
//! tokio's own arguments mean what they mean there, so a ported
//! `#[tokio::main(...)]` or `#[tokio::test(...)]` keeps them:
//! `worker_threads = N` is `shards = N`, `flavor = "current_thread"` one
//! shard, `flavor = "multi_thread"` the default, `start_paused = false`
//! nothing (`true` is an error: spargio's clock cannot be paused).
//! Anything else is a compile error pointing at the offending tokens.

#![warn(missing_docs, unreachable_pub)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, FnArg, ItemFn, Lit, Meta, ReturnType, Token, Type};

/// Turns `async fn main()` (optionally `async fn main(handle:
/// RuntimeHandle) -> R`) into a synchronous `main` that builds a runtime,
/// runs the body on shard 0 and shuts the runtime down. Panics if the
/// runtime cannot be built.
///
/// Arguments: `shards = N`, `backend = "auto" | "io_uring" | "epoll"`, and
/// with spargio's feature `tokio-compat`, `tokio_compat = true | false`
/// (`RuntimeBuilder::tokio_compat`; by default it follows the builder's
/// default, on with that feature). tokio's `worker_threads = N` (the same
/// as `shards = N`), `flavor = "multi_thread" | "current_thread"` (the
/// default; one shard) and `start_paused = false` are accepted as they
/// are, so a `#[tokio::main(...)]` moves by its path alone.
///
/// ```ignore
/// #[spargio::main(shards = 2)]
/// async fn main(handle: spargio::RuntimeHandle) -> std::io::Result<()> {
///     let n = handle.spawn_stealable(async { 21 * 2 }).unwrap().await.unwrap();
///     assert_eq!(n, 42);
///     Ok(())
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: Tokens = item.into();
    expand(args.into(), item.clone(), false)
        .unwrap_or_else(|e| with_stand_in(e, item))
        .into()
}

/// Like [`main`](macro@main), for `#[test]` functions: each test gets its
/// own runtime.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    let item: Tokens = item.into();
    expand(args.into(), item.clone(), true)
        .unwrap_or_else(|e| with_stand_in(e, item))
        .into()
}

/// The error plus an empty function of the same name, so the user sees
/// the error we report and not a follow-on "`main` function not found".
fn with_stand_in(err: syn::Error, item: Tokens) -> Tokens {
    let err = err.to_compile_error();
    match syn::parse2::<ItemFn>(item) {
        Ok(func) => {
            let name = &func.sig.ident;
            quote!(#err fn #name() {})
        }
        Err(_) => err,
    }
}

struct Args {
    shards: Option<Tokens>,
    backend: Option<Tokens>,
    tokio_compat: Option<Tokens>,
}

/// tokio's `flavor` argument.
enum Flavor {
    MultiThread,
    CurrentThread(Span),
}

fn parse_args(args: Tokens) -> syn::Result<Args> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args)?;
    // The count, its tokens (for spans), and the argument that gave it
    // (`shards`, or tokio's `worker_threads`).
    let mut shards: Option<(usize, Tokens, String)> = None;
    let mut flavor = None;
    let mut backend = None;
    let mut tokio_compat = None;
    for meta in metas {
        let Meta::NameValue(nv) = &meta else {
            return Err(syn::Error::new(
                meta.span(),
                "expected `shards = N`, `backend = \"auto\" | \"io_uring\" | \"epoll\"`, \
                 `tokio_compat = true | false`, or tokio's `worker_threads = N`, \
                 `flavor = \"multi_thread\" | \"current_thread\"`",
            ));
        };
        let name = nv
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match (name.as_str(), &nv.value) {
            // tokio's `worker_threads` is spargio's `shards`.
            (
                "shards" | "worker_threads",
                Expr::Lit(ExprLit {
                    lit: Lit::Int(n), ..
                }),
            ) => {
                if let Some((_, _, first)) = &shards {
                    return Err(syn::Error::new(
                        nv.span(),
                        if *first == name {
                            format!("`{name}` given twice")
                        } else {
                            format!("`{first}` and `{name}` both give the shard count: keep one")
                        },
                    ));
                }
                let count = n.base10_parse::<usize>()?;
                if count == 0 {
                    return Err(syn::Error::new(
                        n.span(),
                        format!("`{name}` must be at least 1"),
                    ));
                }
                shards = Some((count, quote_spanned!(n.span()=> #n), name));
            }
            ("shards" | "worker_threads", other) => {
                return Err(syn::Error::new(
                    other.span(),
                    format!("`{name}` takes a positive integer literal"),
                ));
            }
            (
                "flavor",
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }),
            ) => {
                if flavor.is_some() {
                    return Err(syn::Error::new(nv.span(), "`flavor` given twice"));
                }
                flavor = Some(match s.value().as_str() {
                    "multi_thread" => Flavor::MultiThread,
                    "current_thread" => Flavor::CurrentThread(s.span()),
                    _ => {
                        return Err(syn::Error::new(
                            s.span(),
                            "expected \"multi_thread\" (spargio's runtime: a shard per CPU \
                             unless `worker_threads`/`shards` says otherwise) or \
                             \"current_thread\" (one shard)",
                        ))
                    }
                });
            }
            ("flavor", other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "`flavor` takes \"multi_thread\" or \"current_thread\"",
                ));
            }
            (
                "start_paused",
                Expr::Lit(ExprLit {
                    lit: Lit::Bool(b), ..
                }),
            ) => {
                if b.value {
                    return Err(syn::Error::new(
                        nv.span(),
                        "spargio's clock cannot be paused: `start_paused = true` (tokio's \
                         `test-util` clock) has no counterpart; time in a spargio test is real",
                    ));
                }
            }
            ("start_paused", other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "`start_paused` takes `false`",
                ));
            }
            (
                "backend",
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }),
            ) => {
                if backend.is_some() {
                    return Err(syn::Error::new(nv.span(), "`backend` given twice"));
                }
                let variant = match s.value().as_str() {
                    "auto" => quote!(Auto),
                    "io_uring" => quote!(IoUring),
                    "epoll" => quote!(Epoll),
                    _ => {
                        return Err(syn::Error::new(
                            s.span(),
                            "expected \"auto\", \"io_uring\" or \"epoll\"",
                        ))
                    }
                };
                backend =
                    Some(quote_spanned!(s.span()=> .backend(::spargio::BackendKind::#variant)));
            }
            (
                "tokio_compat",
                Expr::Lit(ExprLit {
                    lit: Lit::Bool(b), ..
                }),
            ) => {
                if tokio_compat.is_some() {
                    return Err(syn::Error::new(nv.span(), "`tokio_compat` given twice"));
                }
                tokio_compat = Some(quote_spanned!(b.span()=> .tokio_compat(#b)));
            }
            ("tokio_compat", other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "`tokio_compat` takes `true` or `false` (needs spargio's feature `tokio-compat`)",
                ));
            }
            ("backend", other) => {
                return Err(syn::Error::new(
                    other.span(),
                    "`backend` takes \"auto\", \"io_uring\" or \"epoll\"",
                ));
            }
            _ => {
                return Err(syn::Error::new(
                    nv.path.span(),
                    format!(
                        "unknown argument `{name}`: expected `shards`, `backend`, `tokio_compat`, \
                         or tokio's `worker_threads`, `flavor`, `start_paused = false`"
                    ),
                ));
            }
        }
    }
    // tokio's current-thread flavor is one shard; with a count of more it
    // is a contradiction, as tokio says too.
    let shards = match (flavor, shards) {
        (Some(Flavor::CurrentThread(span)), Some((n, _, name))) if n != 1 => {
            return Err(syn::Error::new(
                span,
                format!(
                    "`flavor = \"current_thread\"` is one shard, and `{name} = {n}` asks for \
                     {n}: drop one of them (or use `flavor = \"multi_thread\"`)"
                ),
            ));
        }
        (_, Some((_, tokens, _))) => Some(tokens),
        (Some(Flavor::CurrentThread(span)), None) => Some(quote_spanned!(span=> 1)),
        (Some(Flavor::MultiThread) | None, None) => None,
    };
    Ok(Args {
        shards,
        backend,
        tokio_compat,
    })
}

fn expand(args: Tokens, item: Tokens, is_test: bool) -> syn::Result<Tokens> {
    let args = parse_args(args)?;
    let func: ItemFn = syn::parse2(item)?;
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "the function must be `async`",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "the function cannot be generic",
        ));
    }
    if sig.inputs.len() > 1 {
        return Err(syn::Error::new(
            sig.inputs.iter().nth(1).span(),
            "expected no parameters or one `RuntimeHandle` parameter",
        ));
    }
    let param = match sig.inputs.first() {
        None => quote!(_: ::spargio::RuntimeHandle),
        Some(FnArg::Typed(pt)) => quote!(#pt),
        Some(FnArg::Receiver(r)) => {
            return Err(syn::Error::new(r.span(), "`self` is not allowed here"));
        }
    };
    let attrs = &func.attrs;
    let vis = &func.vis;
    let name = &sig.ident;
    let output = &sig.output;
    let body = &func.block;
    let shards = args.shards.map(|n| quote!(.shards(#n)));
    let backend = args.backend;
    let tokio_compat = args.tokio_compat;
    let test_attr = is_test.then(|| quote!(#[::core::prelude::v1::test]));
    let span = Span::call_site();
    // The result crosses from shard 0 to the calling thread: as it is
    // when it is `Send`, a `Box<dyn Error>` as its text
    // (`spargio::runtime::macro_output`). The declared type is written
    // out for that choice; an `impl Trait` (or `!`) cannot be, and crosses
    // as it is.
    let ret = match output {
        ReturnType::Default => Some(quote!(())),
        ReturnType::Type(_, ty) if matches!(**ty, Type::ImplTrait(_) | Type::Never(_)) => None,
        ReturnType::Type(_, ty) => Some(quote!(#ty)),
    };
    let run = match ret {
        Some(ret) => quote_spanned! {span=>
            ::spargio::__private::Unpack::unpack(
                ::spargio::__private::block_on(::spargio::run_local_on(__builder, 0, |__ctx: ::spargio::ShardCtx| {
                    let __entry = |#param| async move #body;
                    let __body = __entry(__ctx.handle());
                    async move {
                        #[allow(unused_imports)]
                        use ::spargio::__private::{PackBoxedError as _, PackSend as _};
                        let __out: #ret = __body.await;
                        (&::spargio::__private::Wrap::new(__out)).__spargio_pack()
                    }
                }))
                .expect("spargio runtime failed to start"),
            )
        },
        None => quote_spanned! {span=>
            ::spargio::__private::block_on(::spargio::run_local_on(__builder, 0, |__ctx: ::spargio::ShardCtx| {
                let __entry = |#param| async move #body;
                __entry(__ctx.handle())
            }))
            .expect("spargio runtime failed to start")
        },
    };
    Ok(quote_spanned! {span=>
        #test_attr
        #(#attrs)*
        #vis fn #name() #output {
            let __builder = ::spargio::RuntimeBuilder::new() #shards #backend #tokio_compat;
            #run
        }
    })
}
