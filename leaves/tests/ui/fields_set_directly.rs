// The fields of a verifier input are private: the constructor is the only way in.
use tdd_engine::run::Phase;
use tdd_prompts::BehaviourSpec;
use tdd_prompts::CommitSha;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

fn literal(ids: Vec<TestId>, spec: BehaviourSpec, sha: CommitSha) -> VerifierInput {
    VerifierInput {
        test_ids: ids,
        behaviour_spec: spec,
        repo_at: sha,
        base: None,
        phase: Phase::AwaitingImpl,
    }
}

fn main() {}
