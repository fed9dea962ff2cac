// A developer's claim about which test proves the behaviour is a String, and a
// verifier takes test ids only from the plan or an observation.
use tdd_engine::run::Phase;
use tdd_prompts::BehaviourSpec;
use tdd_prompts::CommitSha;
use tdd_prompts::VerifierInput;

fn build(spec: BehaviourSpec, sha: CommitSha, developer_said: String) -> VerifierInput {
    VerifierInput::new(vec![developer_said], spec, sha, None, Phase::AwaitingImpl)
}

fn main() {}
