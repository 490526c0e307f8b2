//! The Gemini wire: rendering, turn selection, the call/response and thought-signature
//! invariants, faults, the model listing and unknown methods.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agentloop_testkit::{Fault, MockServer, Script, StopReason, Turn, WireFormat};
use common::{client, first_request, parse_sse, path, post, post_first};
use serde_json::{Value, json};

const G: WireFormat = WireFormat::Gemini;

fn chunks(body: &str) -> Vec<Value> {
    parse_sse(body)
        .into_iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect()
}

fn parts(chunk: &Value) -> Vec<Value> {
    chunk["candidates"][0]["content"]["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn thinking_text_and_the_final_chunk_are_rendered_like_gemini() {
    let mut turn = Turn::text("Hello 東京")
        .with_thinking("Hmm.")
        .with_chunk_size(3);
    turn.usage = Some(
        serde_json::from_value(
            json!({"input_tokens": 7, "output_tokens": 5, "cache_read_tokens": 3}),
        )
        .unwrap(),
    );
    let server = MockServer::start(Script::new(vec![turn]));
    let reply = post_first(&server, G, "hi").await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.contains("}\r\n\r\ndata: "), "CRLF framing");
    let all = chunks(&reply.body);
    let thought: String = all
        .iter()
        .flat_map(parts)
        .filter(|p| p["thought"] == true)
        .map(|p| p["text"].as_str().unwrap().to_string())
        .collect();
    let text: String = all
        .iter()
        .flat_map(parts)
        .filter(|p| p.get("thought").is_none())
        .map(|p| p["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!((thought.as_str(), text.as_str()), ("Hmm.", "Hello 東京"));
    let last = all.last().unwrap();
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        parts(last),
        vec![
            json!({"text": "", "thoughtSignature": format!("mock-sig-{}", last["responseId"].as_str().unwrap())})
        ]
    );
    assert_eq!(
        last["usageMetadata"],
        json!({"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15,
            "cachedContentTokenCount": 3})
    );
    assert!(
        all.iter()
            .all(|c| c["modelVersion"] == "gemini-test" && c["responseId"] == last["responseId"]),
        "the model comes from the path"
    );
    let rec = &server.requests()[0];
    assert_eq!(rec.format, G);
    assert_eq!(rec.turn, Some(0));
    // Another response gets another id.
    let again = post_first(&server, G, "other").await;
    assert_ne!(chunks(&again.body)[0]["responseId"], last["responseId"]);
}

/// The model turn a correct client sends back, and its function responses.
fn continue_with(req: &mut Value, model_parts: Value, responses: Value) {
    let contents = req["contents"].as_array_mut().unwrap();
    contents.push(json!({"role": "model", "parts": model_parts}));
    contents.push(json!({"role": "user", "parts": responses}));
}

fn response(name: &str) -> Value {
    json!({"functionResponse": {"name": name, "response": {"output": "ok"}}})
}

#[tokio::test]
async fn calls_come_in_one_chunk_signed_once_and_must_be_answered_by_name_with_a_signature() {
    let script = Script::from_value(json!({"turns": [
        {"tool_calls": [{"name": "a", "arguments": {"x": 1}}, {"id": "call_b", "name": "b"}]},
        {"text": "done"}
    ]}))
    .unwrap();
    let server = MockServer::start(script);
    let req = first_request(G, "calls");
    let reply = post(&server.base_url(), path(G), &req).await;
    let all = chunks(&reply.body);
    let calls = parts(&all[0]);
    assert_eq!(calls.len(), 2);
    let signature = calls[0]["thoughtSignature"].as_str().unwrap().to_string();
    assert!(signature.starts_with("mock-sig-"), "{signature}");
    assert_eq!(
        calls[0]["functionCall"],
        json!({"name": "a", "args": {"x": 1}}),
        "no id unless the script gives one"
    );
    assert_eq!(
        calls[1],
        json!({"functionCall": {"name": "b", "args": {}, "id": "call_b"}})
    );
    assert_eq!(all[1]["candidates"][0]["finishReason"], "STOP");

    // No signature on the first call of the step: Gemini 3's 400.
    let mut unsigned = req.clone();
    continue_with(
        &mut unsigned,
        json!([{"functionCall": {"name": "a", "args": {"x": 1}}},
               {"functionCall": {"name": "b", "args": {}, "id": "call_b"}}]),
        json!([response("a"), {"functionResponse": {"name": "b", "id": "call_b", "response": {"output": "ok"}}}]),
    );
    let reply = post(&server.base_url(), path(G), &unsigned).await;
    assert_eq!(reply.status, 400);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(error["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(error["error"]["code"], 400);
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Function call is missing a thought_signature"),
        "{error}"
    );

    // Responses out of order, and one missing its call id.
    let mut misordered = req.clone();
    continue_with(
        &mut misordered,
        json!([{"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": signature},
               {"functionCall": {"name": "b", "args": {}, "id": "call_b"}}]),
        json!([response("b"), response("a")]),
    );
    let reply = post(&server.base_url(), path(G), &misordered).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("is named `b`"), "{}", reply.body);

    // The replayed signature (or Google's sentinel) and answers in order: the next turn.
    for sig in [signature.as_str(), "skip_thought_signature_validator"] {
        let mut good = req.clone();
        continue_with(
            &mut good,
            json!([{"functionCall": {"name": "a", "args": {"x": 1}}, "thoughtSignature": sig},
                   {"functionCall": {"name": "b", "args": {}, "id": "call_b"}}]),
            json!([response("a"), {"functionResponse": {"name": "b", "id": "call_b", "response": {"output": "ok"}}}]),
        );
        let reply = post(&server.base_url(), path(G), &good).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let text: String = chunks(&reply.body)
            .iter()
            .flat_map(parts)
            .filter_map(|p| p["text"].as_str().map(str::to_string))
            .collect();
        assert_eq!(text, "done");
    }
    // One violation per broken rule: the signature, and each misnamed response.
    assert_eq!(server.violations().len(), 3, "{:?}", server.violations());
}

#[tokio::test]
async fn faults_use_gemini_shapes() {
    let script = Script::new(vec![
        Turn::text("Hello there")
            .with_fault(Fault::Status {
                status: 429,
                headers: Default::default(),
                body: None,
            })
            .with_fault(Fault::EofWithoutTerminal)
            .with_fault(Fault::MalformedAfterBytes(0)),
    ]);
    let server = MockServer::start(script);
    let req = first_request(G, "faults");
    let reply = post(&server.base_url(), path(G), &req).await;
    assert_eq!(reply.status, 429);
    let error: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(error["error"]["status"], "RESOURCE_EXHAUSTED");
    let cut = post(&server.base_url(), path(G), &req).await;
    assert!(!cut.body.contains("finishReason"), "{}", cut.body);
    assert!(cut.body.contains("Hello there"));
    let garbage = post(&server.base_url(), path(G), &req).await;
    assert!(
        garbage
            .body
            .starts_with("data: {\"agentloop_testkit\": malformed json\r\n\r\n"),
        "{}",
        garbage.body
    );
    assert!(garbage.body.contains("finishReason"));
}

#[tokio::test]
async fn a_length_stop_is_max_tokens() {
    let server = MockServer::start(Script::new(vec![
        Turn::text("cut").with_stop_reason(StopReason::Length),
    ]));
    let reply = post_first(&server, G, "x").await;
    let all = chunks(&reply.body);
    assert_eq!(
        all.last().unwrap()["candidates"][0]["finishReason"],
        "MAX_TOKENS"
    );
}

#[tokio::test]
async fn models_are_listed_in_pages_and_other_methods_are_not_found() {
    let script = Script::from_value(json!({"turns": [{"text": "x"}],
        "models": ["gemini-a", "gemini-b", "gemini-c"]}))
    .unwrap();
    let server = MockServer::start(script);
    let get = |query: &'static str| {
        let url = format!("{}/v1beta/models{query}", server.base_url());
        async move {
            let resp = client().get(url).send().await.unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            serde_json::from_str::<Value>(&resp.text().await.unwrap()).unwrap()
        }
    };
    let first = get("?pageSize=2").await;
    assert_eq!(
        first["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["models/gemini-a", "models/gemini-b"]
    );
    assert_eq!(first["nextPageToken"], "2");
    let second = get("?pageSize=2&pageToken=2").await;
    assert_eq!(second["models"][0]["name"], "models/gemini-c");
    assert!(second.get("nextPageToken").is_none());

    let other = post(
        &server.base_url(),
        "/v1beta/models/gemini-a:generateContent",
        &first_request(G, "x"),
    )
    .await;
    assert_eq!(other.status, 404);
    assert!(
        other.body.contains("streamGenerateContent"),
        "{}",
        other.body
    );
}
