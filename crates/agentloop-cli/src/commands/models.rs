//! `agentloop models [PROVIDER]`: the models a provider's API lists — OpenAI's (and compatible
//! servers') `GET {base}/models`, Anthropic's paginated `GET {base}/v1/models`, Gemini's
//! paginated `GET {base}/v1beta/models` — printed one id per line, sorted, or as JSON lines. Keys come from the environment as for `run` and are never
//! printed; whatever the server says is shown with control characters made visible.

use std::time::Duration;

use agentloop::providers::{ProviderConfig, anthropic, gemini};
use serde_json::{Value, json};

use crate::cli::ModelsArgs;
use crate::error::Failure;
use crate::provider::{Provider, provider_connection};
use crate::ui::safe_text::visible_line;

/// How long one listing request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Anthropic and Gemini pages are followed at most this many times (a server that always says
/// there is more must not loop forever).
const MAX_PAGES: usize = 100;

/// One listed model.
#[derive(Debug, Clone, PartialEq)]
struct Listed {
    id: String,
    name: Option<String>,
    created: Option<Value>,
}

/// Runs `agentloop models`.
pub async fn run(args: ModelsArgs) -> Result<(), Failure> {
    let provider = Provider::parse(&args.provider).ok_or_else(|| {
        Failure::usage(format!(
            "unknown provider {:?}: use openai, openai-responses, anthropic or gemini",
            args.provider
        ))
    })?;
    let config = provider_connection(provider, args.base_url.as_deref())?;
    // No redirects: reqwest would carry `x-api-key` to another host.
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| Failure::new(format!("cannot build the HTTP client: {e}")))?;
    let mut models = match provider {
        Provider::Anthropic => list_anthropic(&client, &config).await?,
        Provider::Gemini => list_gemini(&client, &config).await?,
        Provider::OpenAi | Provider::OpenAiResponses => list_openai(&client, &config).await?,
    };
    models.sort_by(|a, b| a.id.cmp(&b.id));
    models.dedup_by(|a, b| a.id == b.id);
    let mut out = String::new();
    for model in &models {
        if args.json {
            out.push_str(
                &json!({"id": model.id, "name": model.name, "created": model.created}).to_string(),
            );
        } else {
            out.push_str(&visible_line(&model.id));
        }
        out.push('\n');
    }
    crate::ui::render::out(&out);
    Ok(())
}

/// `{base}/{path}` without doubled slashes.
fn endpoint(config: &ProviderConfig, path: &str) -> String {
    format!("{}/{path}", config.base_url.trim_end_matches('/'))
}

/// The base URL as it may be shown: `user:password@` redacted.
fn shown_url(url: &str) -> String {
    agentloop::providers::redact_url(url).into_owned()
}

async fn get_json(request: reqwest::RequestBuilder, url: &str) -> Result<Value, Failure> {
    let shown = shown_url(url);
    let response = request.send().await.map_err(|e| {
        Failure::new(format!(
            "cannot list models from {shown}: {}",
            e.without_url()
        ))
    })?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| Failure::new(format!("cannot read the model list from {shown}: {e}")))?;
    let value: Option<Value> = serde_json::from_slice(&body).ok();
    if !status.is_success() {
        let message = value
            .as_ref()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned());
        return Err(Failure::new(format!(
            "{shown} answered HTTP {status} to the model list: {}",
            visible_line(&message)
        )));
    }
    value.ok_or_else(|| Failure::new(format!("{shown} sent a model list that is not JSON")))
}

/// How a provider takes its key.
enum Auth {
    /// `Authorization: Bearer KEY` (OpenAI and compatible servers).
    Bearer,
    /// `x-api-key: KEY` (Anthropic).
    ApiKeyHeader,
    /// `x-goog-api-key: KEY` (Gemini).
    GoogleKeyHeader,
}

/// The key (if any) and the configured extra headers on `request`.
fn with_headers(
    mut request: reqwest::RequestBuilder,
    config: &ProviderConfig,
    auth: Auth,
) -> reqwest::RequestBuilder {
    if let Some(key) = &config.api_key {
        request = match auth {
            Auth::Bearer => request.bearer_auth(key.expose()),
            Auth::ApiKeyHeader => request.header("x-api-key", key.expose()),
            Auth::GoogleKeyHeader => request.header("x-goog-api-key", key.expose()),
        };
    }
    for (name, value) in &config.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    request
}

/// The `data` array of a listing.
fn data_array<'v>(body: &'v Value, url: &str) -> Result<&'v Vec<Value>, Failure> {
    body["data"].as_array().ok_or_else(|| {
        Failure::new(format!(
            "{} sent a model list without a `data` array",
            shown_url(url)
        ))
    })
}

fn listed(item: &Value, name_key: &str, created_key: &str) -> Option<Listed> {
    let id = item["id"].as_str()?.to_owned();
    Some(Listed {
        id,
        name: item[name_key].as_str().map(str::to_owned),
        created: item.get(created_key).cloned().filter(|v| !v.is_null()),
    })
}

/// OpenAI and compatible servers: `{"data": [{"id", "created", "owned_by"}]}` (llama.cpp and
/// others also send a `models` array; `data` is the standard one).
async fn list_openai(
    client: &reqwest::Client,
    config: &ProviderConfig,
) -> Result<Vec<Listed>, Failure> {
    let url = endpoint(config, "models");
    let request = with_headers(client.get(&url), config, Auth::Bearer);
    let body = get_json(request, &url).await?;
    Ok(data_array(&body, &url)?
        .iter()
        .filter_map(|m| listed(m, "owned_by", "created"))
        .collect())
}

/// The URL of one page of a paginated list: `url` with the page size and, after the first
/// page, where to go on from.
fn page_url(
    url: &str,
    (size_key, size): (&str, &str),
    (from_key, from): (&str, Option<&str>),
) -> Result<reqwest::Url, Failure> {
    let mut page = reqwest::Url::parse(url).map_err(|e| {
        Failure::usage(format!("the base URL {} is not valid: {e}", shown_url(url)))
    })?;
    page.query_pairs_mut().append_pair(size_key, size);
    if let Some(from) = from {
        page.query_pairs_mut().append_pair(from_key, from);
    }
    Ok(page)
}

/// Anthropic: pages of `{"data": [{"id", "display_name", "created_at"}], "has_more",
/// "last_id"}`, followed with `after_id`.
async fn list_anthropic(
    client: &reqwest::Client,
    config: &ProviderConfig,
) -> Result<Vec<Listed>, Failure> {
    let url = endpoint(config, "v1/models");
    let mut models = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page_url = page_url(&url, ("limit", "1000"), ("after_id", after.as_deref()))?;
        let request = with_headers(
            client
                .get(page_url)
                .header("anthropic-version", anthropic::API_VERSION),
            config,
            Auth::ApiKeyHeader,
        );
        let body = get_json(request, &url).await?;
        let page = data_array(&body, &url)?;
        models.extend(
            page.iter()
                .filter_map(|m| listed(m, "display_name", "created_at")),
        );
        let next = body["last_id"].as_str().map(str::to_owned);
        if body["has_more"] != Value::Bool(true) || next.is_none() || next == after {
            return Ok(models);
        }
        after = next;
    }
    Err(Failure::new(format!(
        "{} kept saying it has more models after {MAX_PAGES} pages",
        shown_url(&url)
    )))
}

/// Gemini: pages of `{"models": [{"name": "models/…", "displayName", …}], "nextPageToken"}`,
/// followed with `pageToken`. Ids are the names without `models/`; only models that can
/// generate content (`supportedGenerationMethods`, when given) are listed.
async fn list_gemini(
    client: &reqwest::Client,
    config: &ProviderConfig,
) -> Result<Vec<Listed>, Failure> {
    let base = config.base_url.trim_end_matches('/');
    let versioned = ["/v1beta", "/v1", "/v1alpha"]
        .iter()
        .any(|v| base.ends_with(v));
    let url = if versioned {
        endpoint(config, "models")
    } else {
        endpoint(config, &format!("{}/models", gemini::API_VERSION))
    };
    let mut models = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page_url = page_url(&url, ("pageSize", "1000"), ("pageToken", token.as_deref()))?;
        let request = with_headers(client.get(page_url), config, Auth::GoogleKeyHeader);
        let body = get_json(request, &url).await?;
        let page = body["models"].as_array().ok_or_else(|| {
            Failure::new(format!(
                "{} sent a model list without a `models` array",
                shown_url(&url)
            ))
        })?;
        models.extend(page.iter().filter_map(|m| {
            let generates = m["supportedGenerationMethods"]
                .as_array()
                .is_none_or(|methods| methods.iter().any(|x| x == "generateContent"));
            let name = m["name"].as_str()?;
            generates.then(|| Listed {
                id: name.strip_prefix("models/").unwrap_or(name).to_owned(),
                name: m["displayName"].as_str().map(str::to_owned),
                created: None,
            })
        }));
        let next = body["nextPageToken"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if next.is_none() || next == token {
            return Ok(models);
        }
        token = next;
    }
    Err(Failure::new(format!(
        "{} kept saying it has more models after {MAX_PAGES} pages",
        shown_url(&url)
    )))
}
