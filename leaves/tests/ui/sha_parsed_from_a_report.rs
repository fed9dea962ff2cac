// A commit id a developer reports is not a commit git resolved.
use tdd_engine::run::Phase;
use tdd_leaves::Response;
use tdd_prompts::BehaviourSpec;
use tdd_prompts::CommitSha;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

fn build(developer: &Response, ids: Vec<TestId>, spec: BehaviourSpec) -> VerifierInput {
    let sha: CommitSha = serde_json::from_str(&developer.text).unwrap();
    VerifierInput::new(ids, spec, sha, None, Phase::AwaitingImpl)
}

fn main() {}
