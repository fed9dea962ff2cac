//! placeholder
use crate::config::AdapterKind;
use crate::observe::*;
#[derive(Debug)]
pub(crate) struct Cargo;
impl Adapter for Cargo {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Pytest
    }
    fn collect(&self, _p: &Project) -> Result<Collection, ObserveError> {
        Ok(Collection::default())
    }
    fn run(&self, _p: &Project, _s: &Selection) -> Result<Observation, ObserveError> {
        Err(ObserveError::BadTarget {
            target: String::new(),
            project: String::new(),
        })
    }
    fn select(&self, _p: &Project, _n: &str) -> Vec<String> {
        Vec::new()
    }
    fn target_key(&self, _p: &Project, n: &str) -> TargetKey {
        TargetKey {
            id: n.into(),
            collected_as: n.into(),
            scopes: vec![],
        }
    }
    fn stub_hint(&self) -> &'static str {
        ""
    }
}
