//! What the adapters' unit tests share: running an SSE body through a stream parser the way the
//! transport does, so each adapter's tests only build bodies and check what came out.

use super::core::StreamParser;
use super::sse::SseDecoder;
use crate::model::{ModelDelta, ModelError, ModelEvent, StreamErrorKind};
use crate::transcript::Message;

/// Decodes `body` (SSE text, any framing) and feeds its events to `parser`: the model events it
/// emitted, and how the stream ended — the finished message after a terminal event (or at the
/// end of a body [`complete_at_eof`](StreamParser::complete_at_eof) accepts), the error the
/// parser stopped with, or `None` when the body ended without either.
pub(crate) fn parse_sse<P: StreamParser>(
    parser: &mut P,
    body: &str,
) -> (Vec<ModelEvent>, Option<Result<Message, ModelError>>) {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    if let Err(e) = decoder.push(body.as_bytes(), &mut events) {
        panic!("the test body is not valid SSE: {e}");
    }
    let mut out = Vec::new();
    for event in events {
        match parser.on_event(event, &mut out) {
            Ok(false) => {}
            Ok(true) => return (out, Some(parser.finish())),
            Err(e) => return (out, Some(Err(e))),
        }
    }
    let end = parser.complete_at_eof().then(|| parser.finish());
    (out, end)
}

/// [`parse_sse`] for a body that must end: a body that stops without a terminal event is the
/// error a cut stream gets.
pub(crate) fn parse_to_end<P: StreamParser>(
    parser: &mut P,
    body: &str,
) -> (Vec<ModelEvent>, Result<Message, ModelError>) {
    let (out, end) = parse_sse(parser, body);
    let end = end.unwrap_or_else(|| Err(ModelError::stream(StreamErrorKind::Cut, "no terminal")));
    (out, end)
}

/// The deltas among `events`, in order.
pub(crate) fn deltas(events: Vec<ModelEvent>) -> Vec<ModelDelta> {
    events
        .into_iter()
        .filter_map(|e| match e {
            ModelEvent::Delta(d) => Some(d),
            _ => None,
        })
        .collect()
}
