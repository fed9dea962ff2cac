// A leaf's final text (its stdout) cannot become the behaviour a verifier judges.
use tdd_engine::run::Phase;
use tdd_leaves::Response;
use tdd_prompts::BehaviourSpec;
use tdd_prompts::CommitSha;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

fn build(developer: &Response, ids: Vec<TestId>, sha: CommitSha) -> VerifierInput {
    let spec: BehaviourSpec = developer.text.clone().into();
    VerifierInput::new(ids, spec, sha, None, Phase::AwaitingImpl)
}

fn main() {}
