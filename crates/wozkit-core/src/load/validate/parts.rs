//! The meaning checks of a dialogue study's own parts: unique ids, the world, media files,
//! states, actions, the study's conditions, the survey, and reachability of every state.
//! [`super::check`] runs them in that order.

use std::collections::{HashSet, VecDeque};

use super::{ACTION_VARS, BUILTIN_VARS, Checker, Compiled, StudySource, did_you_mean};
use crate::event::Role;
use crate::expr::Condition;
use crate::model::{Effects, State};
use crate::questions;

impl Checker<'_> {
    /// Ids are unique within each list (states, fixed options, actions, robots, locations,
    /// subtasks).
    pub(super) fn unique_ids(&mut self) {
        let study = self.study;
        self.unique(
            "state",
            "/states",
            study.states.iter().map(|s| s.id.as_str()),
        );
        self.unique(
            "fixed option",
            "/fixed_options",
            study.fixed_options.iter().map(|s| s.id.as_str()),
        );
        self.unique(
            "action",
            "/actions",
            study.actions.iter().map(|s| s.id.as_str()),
        );
        self.unique(
            "robot",
            "/world/robots",
            study.world.robots.iter().map(|s| s.id.as_str()),
        );
        self.unique(
            "location",
            "/world/locations",
            study.world.locations.iter().map(|s| s.id.as_str()),
        );
        self.unique(
            "subtask",
            "/subtasks",
            study.subtasks.iter().map(|s| s.id.as_str()),
        );
    }

    /// The world: variables that do not clash with built-in ones, the map, robots of known kinds
    /// at known locations, the alarm's place and its `cleared_when`.
    pub(super) fn world(&mut self, compiled: &mut Compiled) {
        let study = self.study;
        for name in study.world.variables.keys() {
            if BUILTIN_VARS.contains(&name.as_str()) || ACTION_VARS.contains(&name.as_str()) {
                self.err(
                    &format!("/world/variables/{name}"),
                    format!("world variable `{name}` clashes with a built-in variable"),
                    Some("rename it".into()),
                );
            }
        }
        if let Some(m) = &study.world.map {
            self.media_ref("/world/map", m);
        }
        let locations: HashSet<&str> = study
            .world
            .locations
            .iter()
            .map(|l| l.id.as_str())
            .collect();
        for (i, r) in study.world.robots.iter().enumerate() {
            if !study.world.robot_kinds.contains_key(&r.kind) {
                let hint =
                    did_you_mean(&r.kind, study.world.robot_kinds.keys().map(String::as_str));
                self.err(
                    &format!("/world/robots/{i}/kind"),
                    format!("unknown robot kind `{}`", r.kind),
                    hint,
                );
            }
            if !locations.contains(r.start.as_str()) {
                let hint = did_you_mean(&r.start, locations.iter().copied());
                self.err(
                    &format!("/world/robots/{i}/start"),
                    format!("unknown location `{}`", r.start),
                    hint,
                );
            }
        }

        if let Some(a) = &study.world.alarm {
            let at_location = |id: &str| locations.contains(id);
            let ok = at_location(&a.at)
                || study
                    .world
                    .variables
                    .get(&a.at)
                    .and_then(|v| v.as_str())
                    .is_some_and(at_location);
            if !ok {
                let hint = did_you_mean(
                    &a.at,
                    locations
                        .iter()
                        .copied()
                        .chain(study.world.variables.keys().map(String::as_str)),
                )
                .or_else(|| {
                    Some("name a location id, or a world variable whose value is one".into())
                });
                self.err(
                    "/world/alarm/at",
                    format!(
                        "`{}` is neither a location nor a world variable holding one",
                        a.at
                    ),
                    hint,
                );
            }
            compiled.alarm_cleared = a
                .cleared_when
                .as_ref()
                .and_then(|w| self.condition("/world/alarm/cleared_when", w, &[]));
        }
    }

    /// Every media file is in the study folder.
    pub(super) fn media_files(&mut self, source: &StudySource) {
        let study = self.study;
        for (id, m) in &study.media {
            if source.read(&m.file).is_none() {
                self.err(
                    &format!("/media/{id}/file"),
                    format!("media file `{}` not found", m.file),
                    Some("paths are relative to the study folder".into()),
                );
            }
        }
    }

    /// States: one initial state; conditions, targets, templates, subtasks, effects and locks of
    /// each; a way out of every state that is not terminal.
    pub(super) fn states(&mut self, compiled: &mut Compiled) {
        let study = self.study;
        self.initial_state(compiled);
        let any_global = study.states.iter().any(|s| s.global && !s.terminal);
        for (i, s) in study.states.iter().enumerate() {
            self.state(compiled, i, s, any_global);
        }
    }

    /// Exactly one initial state (none in a study without dialogue states); it is compiled.
    fn initial_state(&mut self, compiled: &mut Compiled) {
        let study = self.study;
        let initials: Vec<usize> = study
            .states
            .iter()
            .enumerate()
            .filter(|(_, s)| s.initial)
            .map(|(i, _)| i)
            .collect();
        match initials.as_slice() {
            [one] => compiled.initial = *one,
            // A study without a live room (an evaluation) has no dialogue states.
            [] if study.states.is_empty() && !study.has_room() => {}
            [] => self.err(
                "/states",
                "no state is marked `initial: true`".into(),
                Some("mark the start state".into()),
            ),
            [_, rest @ ..] => {
                for i in rest {
                    self.err(
                        &format!("/states/{i}/initial"),
                        "more than one initial state".into(),
                        None,
                    );
                }
            }
        }
    }

    /// State `i`: its condition and its transitions' (compiled), targets, templates, subtask,
    /// effects and lock, and a way out unless it is terminal (`any_global`: a global state
    /// that is not terminal is a way out of every state).
    fn state(&mut self, compiled: &mut Compiled, i: usize, s: &State, any_global: bool) {
        let study = self.study;
        let base = format!("/states/{i}");
        compiled.state_when.push(
            s.when
                .as_ref()
                .and_then(|w| self.condition(&format!("{base}/when"), w, &[])),
        );
        let mut tw = vec![];
        for (j, t) in s.transitions.iter().enumerate() {
            self.state_ref(&format!("{base}/transitions/{j}"), t.to());
            tw.push(
                t.when()
                    .and_then(|w| self.condition(&format!("{base}/transitions/{j}/when"), w, &[])),
            );
        }
        compiled.transition_when.push(tw);
        if !s.initial && s.templates.is_empty() {
            self.err(
                &base,
                format!("state `{}` has no templates", s.id),
                Some("add at least one utterance under `templates`".into()),
            );
        }
        for (j, t) in s.templates.iter().enumerate() {
            self.template(&format!("{base}/templates/{j}"), t);
        }
        if let Some(st) = &s.subtask {
            self.subtask_ref(&format!("{base}/subtask"), st);
        }
        self.effects(&format!("{base}/effects"), &s.effects);
        if let Some(lock) = &s.lock {
            if let Some(p) = &lock.prompt {
                self.template(&format!("{base}/lock/prompt"), p);
            }
            self.effects(&format!("{base}/lock/on_approve"), &lock.on_approve);
            self.effects(&format!("{base}/lock/on_deny"), &lock.on_deny);
        }
        let has_way_out = !s.transitions.is_empty()
            || s.global
            || any_global
            || study
                .actions
                .iter()
                .any(|a| a.on_complete.enter.is_some() || !a.on_complete.unlock.is_empty());
        if !s.terminal && !has_way_out {
            self.err(
                &base,
                format!("state `{}` has no way out and is not terminal", s.id),
                Some("add transitions, or mark it `terminal: true`".into()),
            );
        }
    }

    /// Actions: guards (each part where it is written, then the whole), effects, targets, robot
    /// kinds, media and capabilities; the fixed options' templates.
    pub(super) fn actions(&mut self, compiled: &mut Compiled) {
        let study = self.study;
        for (i, a) in study.actions.iter().enumerate() {
            let base = format!("/actions/{i}");
            // Each part is checked where it is written; the whole guard is compiled once more as
            // one condition (what the action table evaluates), unless a part failed.
            let parts: Vec<Option<Condition>> = a
                .guard
                .iter()
                .flat_map(|g| g.conditions())
                .map(|(ptr, src)| self.condition(&format!("{base}/guard{ptr}"), src, ACTION_VARS))
                .collect();
            let whole = match &a.guard {
                Some(g) if parts.iter().all(Option::is_some) => match g {
                    crate::model::Guard::Expr(_) => parts[0].clone(),
                    crate::model::Guard::Parts(_) => Condition::compile(&g.expression()).ok(),
                },
                _ => None,
            };
            compiled.action_guard.push(whole);
            compiled.action_guard_parts.push(match &a.guard {
                Some(crate::model::Guard::Parts(ps)) => parts
                    .into_iter()
                    .zip(ps)
                    .filter_map(|(c, p)| c.map(|c| (c, p.reason.clone())))
                    .collect(),
                _ => vec![],
            });
            self.effects(&format!("{base}/on_complete"), &a.on_complete);
            if a.moves && !a.target {
                self.err(
                    &format!("{base}/moves"),
                    format!("action `{}` moves the robot but takes no target", a.id),
                    Some("add `target: true`, or remove `moves`".into()),
                );
            }
            for kind in a.duration.by_kind.keys() {
                if !study.world.robot_kinds.contains_key(kind) {
                    self.err(
                        &format!("{base}/duration/by_kind/{kind}"),
                        format!("unknown robot kind `{kind}`"),
                        None,
                    );
                }
            }
            for (kind, media) in &a.media_by_kind {
                if !study.world.robot_kinds.contains_key(kind) {
                    self.err(
                        &format!("{base}/media_by_kind/{kind}"),
                        format!("unknown robot kind `{kind}`"),
                        None,
                    );
                }
                self.media_ref(&format!("{base}/media_by_kind/{kind}"), media);
            }
            if let Some(cap) = &a.requires
                && !study
                    .world
                    .robots
                    .iter()
                    .any(|r| r.capabilities.contains(cap))
            {
                self.err(
                    &format!("{base}/requires"),
                    format!("no robot has capability `{cap}`"),
                    None,
                );
            }
        }
        for (i, f) in study.fixed_options.iter().enumerate() {
            self.template(&format!("/fixed_options/{i}/text"), &f.text);
        }
    }

    /// The study's own conditions: the goal, when a dialogue may be finished, and the bonus.
    pub(super) fn global_conditions(&mut self, compiled: &mut Compiled) {
        let study = self.study;
        compiled.goal = study
            .goal
            .as_ref()
            .and_then(|g| self.condition("/goal", g, &[]));
        compiled.finish_when = study
            .session
            .finish
            .when
            .as_ref()
            .and_then(|g| self.condition("/session/finish/when", g, &[]));
        compiled.bonus_when = study
            .payment
            .as_ref()
            .and_then(|p| p.bonus.as_ref())
            .and_then(|b| self.condition("/payment/bonus/when", &b.when, &[]));
    }

    /// The survey: the question model's own rules (ids, bounds, options, keys per kind), for the
    /// shared questions and each role's own questionnaire; shared parts nobody would see.
    pub(super) fn survey(&mut self) {
        let study = self.study;
        let survey = &study.survey;
        for p in questions::rules::check(&survey.questions, "/survey/questions") {
            self.err(&p.pointer, p.message, p.hint);
        }
        for role in [Role::User, Role::Wizard] {
            if let Some(own) = survey.own(role) {
                for p in questions::rules::check(&own.questions, survey.pointer(role)) {
                    self.err(&p.pointer, p.message, p.hint);
                }
            }
        }
        if survey.user.is_some() && survey.wizard.is_some() {
            if !survey.questions.is_empty() {
                self.err(
                    "/survey/questions",
                    "the shared survey questions are shown to no one: both roles have a \
                     questionnaire of their own (survey.user and survey.wizard)"
                        .into(),
                    Some(
                        "move these questions into survey.user or survey.wizard, or remove one of \
                         them so that role answers the shared questions"
                            .into(),
                    ),
                );
            }
            if survey.title.is_some()
                && survey
                    .user
                    .iter()
                    .chain(&survey.wizard)
                    .all(|q| q.title.is_some())
            {
                self.err(
                    "/survey/title",
                    "the shared survey title is shown to no one: survey.user and survey.wizard \
                     have titles of their own"
                        .into(),
                    Some("remove survey.title".into()),
                );
            }
        }
    }

    /// Every state can be reached from the initial state through transitions, globals, unlocks
    /// and enters (checked only when everything else holds).
    pub(super) fn reachability(&mut self, compiled: &Compiled) {
        let study = self.study;
        if self.problems.is_empty() && !study.states.is_empty() {
            let mut edges: Vec<Vec<usize>> = vec![vec![]; study.states.len()];
            let mut roots = vec![compiled.initial];
            let idx = |id: &str| compiled.state_index.get(id).copied();
            let effect_targets = |e: &Effects| -> Vec<usize> {
                e.enter
                    .iter()
                    .chain(e.unlock.iter())
                    .filter_map(|s| idx(s))
                    .collect()
            };
            for (i, s) in study.states.iter().enumerate() {
                edges[i].extend(s.transitions.iter().filter_map(|t| idx(t.to())));
                edges[i].extend(effect_targets(&s.effects));
                if let Some(l) = &s.lock {
                    edges[i].extend(effect_targets(&l.on_approve));
                    edges[i].extend(effect_targets(&l.on_deny));
                }
                if s.global {
                    roots.push(i);
                }
            }
            for a in &study.actions {
                roots.extend(effect_targets(&a.on_complete));
            }
            let mut seen = vec![false; study.states.len()];
            let mut queue: VecDeque<usize> = roots.into_iter().collect();
            while let Some(i) = queue.pop_front() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                queue.extend(edges[i].iter().copied());
            }
            for (i, s) in study.states.iter().enumerate() {
                if !seen[i] {
                    self.err(
                        &format!("/states/{i}"),
                        format!("state `{}` is unreachable", s.id),
                        Some(
                            "add a transition to it, unlock it from an action, or remove it".into(),
                        ),
                    );
                }
            }
        }
    }
}
