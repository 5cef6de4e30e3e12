//! Shared fixtures: a small study that exercises every engine feature.
#![allow(dead_code)]

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wozkit_core::engine::{Command, Refusal, Session, step};
use wozkit_core::event::{Actor, Event, EventKind, Role};
use wozkit_core::load::{LoadedStudy, StudySource, load_text};

pub const MINI: &str = include_str!("mini.yaml");

pub fn mini() -> LoadedStudy {
    load_text("mini.yaml", MINI, StudySource::Dir(".".into())).expect("the fixture study loads")
}

/// The fixture plus an action that takes no target (`look`). Appended here rather than written
/// in mini.yaml so that the loader tests' line numbers stay where they are.
pub fn mini_with_targetless_action() -> LoadedStudy {
    let text = MINI.replacen(
        "goal:",
        "  - {id: look, label: Look around, act: look.around, duration: {default: 4}}\ngoal:",
        1,
    );
    load_text("mini.yaml", &text, StudySource::Dir(".".into())).expect("the fixture study loads")
}

/// Loads a variant of the fixture; returns the diagnostics as printed lines.
pub fn problems(text: &str) -> Vec<String> {
    match load_text("s.yaml", text, StudySource::Dir(std::env::temp_dir())) {
        Ok(_) => vec![],
        Err(d) => {
            d.0.iter()
                .map(|x| format!("{}:{}: {}", x.line, x.col, x.message))
                .collect()
        }
    }
}

/// Every warning of a study text, as `LINE:COL: message`.
pub fn all_warnings(text: &str) -> Vec<String> {
    let study =
        load_text("s.yaml", text, StudySource::Dir(std::env::temp_dir())).expect("the study loads");
    study
        .compiled
        .warnings
        .iter()
        .map(|w| format!("{}:{}: {}", w.line, w.col, w.message))
        .collect()
}

/// The user, as a participant.
pub const USER: Actor = Actor::Participant {
    role: Role::User,
    participant: None,
};

/// The wizard, as a participant.
pub const WIZARD: Actor = Actor::Participant {
    role: Role::Wizard,
    participant: None,
};

/// A session driven step by step through the engine, keeping its log as the store would.
pub struct Run {
    pub study: LoadedStudy,
    pub s: Session,
    pub log: Vec<Event>,
    pub rng: ChaCha8Rng,
    pub now: u64,
}

impl Run {
    /// A started session of the fixture study.
    pub fn new() -> Run {
        Run::with(mini())
    }

    /// A started session of `study`.
    pub fn with(study: LoadedStudy) -> Run {
        let s = Session::new(&study, "t");
        let mut r = Run {
            study,
            s,
            log: vec![],
            rng: ChaCha8Rng::seed_from_u64(1),
            now: 1_000,
        };
        r.ok(&Actor::System, Command::Start { seed: 1 });
        r
    }

    /// Runs `cmd` from `actor`: the events it emitted (logged), or why it was refused.
    pub fn run(&mut self, actor: &Actor, cmd: Command) -> Result<Vec<EventKind>, Refusal> {
        let st = step(&self.study, &self.s, actor, cmd, self.now, &mut self.rng)?;
        for (a, k) in &st.events {
            self.log.push(Event {
                v: 1,
                session: "t".into(),
                seq: self.log.len() as u64 + 1,
                at_ms: self.now,
                actor: a.clone(),
                kind: k.clone(),
            });
        }
        self.s = st.session;
        Ok(st.events.into_iter().map(|(_, k)| k).collect())
    }

    /// Runs `cmd`, which must be taken.
    pub fn ok(&mut self, actor: &Actor, cmd: Command) -> Vec<EventKind> {
        self.run(actor, cmd.clone())
            .unwrap_or_else(|e| panic!("{cmd:?} refused: {e}"))
    }

    /// Runs `cmd`, which must be refused without changing the state.
    pub fn refused(&mut self, actor: &Actor, cmd: Command) -> Refusal {
        let before = self.s.clone();
        let e = self.run(actor, cmd).expect_err("should be refused");
        assert_eq!(self.s, before, "a refused command changed the state");
        e
    }
}
