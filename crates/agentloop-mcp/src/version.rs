//! MCP protocol version negotiation from the client side.
//!
//! agentloop proposes the newest revision rmcp can negotiate over the `initialize` handshake
//! ([`PROPOSED_PROTOCOL_VERSION`]; later revisions replaced the handshake with per-request
//! metadata, so a server could never echo them back from `initialize`). The server answers with
//! the revision it will speak; agentloop accepts it when it is one of
//! [`SUPPORTED_PROTOCOL_VERSIONS`] and otherwise refuses the server with an error naming both
//! versions, so an incompatible server is reported at start instead of misbehaving later.

use rmcp::model::ProtocolVersion;

use crate::error::McpError;

/// The protocol version agentloop proposes in `initialize`: the newest one the SDK knows that
/// still has an `initialize` handshake.
pub const PROPOSED_PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// The protocol versions agentloop accepts from a server, oldest first: 2025-03-26 (still
/// answered by deployed servers, the conformance suite's own among them), 2025-06-18,
/// 2025-11-25 and the newest version the SDK knows. 2024-11-05 predates streamable HTTP and
/// tool annotations, and is refused.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[ProtocolVersion] = &[
    ProtocolVersion::V_2025_03_26,
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::LATEST,
];

/// Whether agentloop can speak `version` with a server.
pub fn is_supported(version: &ProtocolVersion) -> bool {
    SUPPORTED_PROTOCOL_VERSIONS.contains(version)
}

/// Accepts the version `server` answered, or says which versions did not match.
pub(crate) fn check_answer(server: &str, answered: &ProtocolVersion) -> Result<(), McpError> {
    if is_supported(answered) {
        return Ok(());
    }
    Err(McpError::UnsupportedProtocolVersion {
        server: server.to_owned(),
        proposed: PROPOSED_PROTOCOL_VERSION.to_string(),
        answered: answered.to_string(),
        supported: SUPPORTED_PROTOCOL_VERSIONS
            .iter()
            .map(ProtocolVersion::as_str)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_proposal_is_supported_and_has_a_handshake() {
        assert!(is_supported(&PROPOSED_PROTOCOL_VERSION));
        assert!(PROPOSED_PROTOCOL_VERSION.has_initialize());
        assert!(is_supported(&ProtocolVersion::LATEST));
    }

    #[test]
    fn an_unsupported_answer_names_both_versions() {
        let err = check_answer("old", &ProtocolVersion::V_2024_11_05).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("2024-11-05"), "{text}");
        assert!(text.contains(PROPOSED_PROTOCOL_VERSION.as_str()), "{text}");
        assert!(err.is_unsupported_protocol_version());
        assert!(check_answer("new", &ProtocolVersion::V_2025_06_18).is_ok());
    }
}
