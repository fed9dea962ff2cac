// The developer's whole response does not fit anywhere in a verifier input.
use tdd_engine::run::Phase;
use tdd_leaves::Response;
use tdd_prompts::CommitSha;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

fn build(developer: Response, ids: Vec<TestId>, sha: CommitSha) -> VerifierInput {
    VerifierInput::new(ids, developer, sha, None, Phase::AwaitingImpl)
}

fn main() {}
