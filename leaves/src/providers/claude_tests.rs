//! Claude Code: the accounting of recorded 2.1 streams.

use super::*;
use crate::providers::test_support::fixture;

/// The developer leaf `cargo xtask capture` recorded: three requests to the fake
/// Anthropic API, each reporting 100 input, 20 output, 50 cache-read and 5
/// cache-write tokens.
#[test]
fn a_recorded_run_gives_tokens_cost_and_round_trips() {
    let parsed = parse_stream(&fixture("claude/ok.jsonl"));
    assert!(parsed.terminal && parsed.error.is_none());
    assert_eq!(parsed.turns, Some(3));
    assert_eq!(
        parsed.usage,
        Some(Usage {
            input_tokens: 300,
            output_tokens: 60,
            cache_read_tokens: 150,
            cache_write_tokens: 15,
            reasoning_tokens: 0,
        })
    );
    assert!(parsed.cost_usd.is_some_and(|c| c > 0.0));
    assert_eq!(parsed.text, "Wrote notes.txt.");
    assert_eq!(parsed.meta["claude_code_version"], "2.1.197");
}

#[test]
fn subagents_count_through_model_usage() {
    let stream = r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"ok","total_cost_usd":0.5,"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"modelUsage":{"main":{"inputTokens":10,"outputTokens":5,"cacheReadInputTokens":100,"cacheCreationInputTokens":7,"costUSD":0.4},"sub":{"inputTokens":20,"outputTokens":8,"cacheReadInputTokens":1,"cacheCreationInputTokens":2,"costUSD":0.1}}}"#;
    let parsed = parse_stream(stream);
    assert_eq!(
        parsed.usage,
        Some(Usage {
            input_tokens: 30,
            output_tokens: 13,
            cache_read_tokens: 101,
            cache_write_tokens: 9,
            reasoning_tokens: 0,
        })
    );
    assert_eq!(parsed.cost_usd, Some(0.5));
}

#[test]
fn an_api_error_reported_as_success_fails_with_its_detail() {
    let parsed = parse_stream(&fixture("claude/api-400.jsonl"));
    let error = parsed.error.expect("an error");
    assert!(error.contains("API status 400") && error.contains("Prompt is too long"));
    assert!(!parsed.unavailable);
    let parsed = parse_stream(&fixture("claude/max-turns.jsonl"));
    assert!(
        parsed
            .error
            .expect("an error")
            .contains("Reached maximum number of turns (1)")
    );
}

#[test]
fn refused_credentials_make_the_provider_unavailable() {
    let parsed = parse_stream(&fixture("claude/api-401.jsonl"));
    assert!(parsed.unavailable, "{parsed:?}");
    assert!(parsed.error.expect("an error").contains("API status 401"));
    assert!(
        !parsed.meta["api_retries"]
            .as_array()
            .expect("retries")
            .is_empty()
    );
}
