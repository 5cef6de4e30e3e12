//! The meaning checks of the page flow and the evaluation section: page ids and jumps,
//! conditions and the answers they read, unreachable pages, the pages each kind needs, and the
//! dialogues, pairs and known-answer items of an evaluation.

use std::collections::{HashMap, HashSet, VecDeque};

use super::{Checker, comprehension_vars, did_you_mean, member_names};
use crate::evaluation::{
    AnnotationKind, EvalTask, Evaluation, FromStore, KnownItem, SYSTEM_SPEAKER, StoreValue,
};
use crate::expr::Condition;
use crate::model::{Page, PageKind};
use crate::questions::{self, SCALE_POINTS};

/// Variables of a page's `when` condition.
pub const FLOW_VARS: &[&str] = &[
    "answers",
    "platform",
    "params",
    "onboarding",
    "judged",
    "test",
];

/// Form field names the judging pages use themselves: a question may not take them.
const RESERVED_FIELDS: &[&str] = &["step", "lease", "choice", "justification"];

/// The flow's compiled page conditions, per role: `[user, wizard]`, indexed like the pages.
pub type PageConditions = [Vec<Option<Condition>>; 2];

/// The dialogue ids an evaluation may name.
struct KnownDialogues<'a> {
    /// The evaluation's dialogues.
    known: Vec<&'a str>,
    /// Whether stored sessions are read too: they are read when the server starts, so until then
    /// an unknown id may be one.
    stored: bool,
}

impl<'a> KnownDialogues<'a> {
    /// The dialogue ids of `ev`, and whether it reads stored sessions.
    fn of(ev: &'a Evaluation) -> Self {
        KnownDialogues {
            known: ev.dialogues.iter().map(|d| d.id.as_str()).collect(),
            stored: ev.from_store.is_some(),
        }
    }

    /// Reports `id` at `ptr` unless it names a known dialogue (or stored sessions are read).
    fn check(&self, c: &mut Checker<'_>, ptr: &str, id: &str) {
        if !self.known.contains(&id) && !self.stored {
            let hint = did_you_mean(id, self.known.iter().copied())
                .or_else(|| Some("name a dialogue of `evaluation.dialogues`".into()));
            c.err(ptr, format!("unknown dialogue `{id}`"), hint);
        }
    }
}

impl Checker<'_> {
    /// Checks both roles' flows and the evaluation section; returns the page conditions.
    pub(super) fn flow(&mut self) -> PageConditions {
        let study = self.study;
        let user = self.role_flow("user", &study.flow.user);
        let wizard = self.role_flow("wizard", &study.flow.wizard);
        if let Some(ev) = &study.evaluation {
            self.evaluation(ev);
        }
        let judges = |pages: &[Page]| {
            pages.iter().any(|p| {
                matches!(
                    p.kind,
                    PageKind::Rate | PageKind::Compare | PageKind::Chat | PageKind::Arena
                )
            })
        };
        self.systems();
        if study.has_room() {
            let needs_room = |pages: &[Page]| !pages.iter().any(|p| p.kind == PageKind::Room);
            if needs_room(&study.flow.user) || needs_room(&study.flow.wizard) {
                self.err(
                    "/flow",
                    "each role's flow needs a `room` page".into(),
                    Some("a live room pairs a user with a wizard: both flows lead to it".into()),
                );
            }
            if study.states.is_empty() {
                self.err(
                    "/states",
                    "the flow has a `room` page but the study has no dialogue states".into(),
                    Some("add `states`, or remove the room page".into()),
                );
            }
        } else if study.evaluation.is_none() || !judges(&study.flow.user) {
            self.err(
                "/flow",
                "each role's flow needs a `room` page".into(),
                Some(
                    "or make this an evaluation study: an `evaluation` section and a `rate`, \
                     `compare`, `chat` or `arena` page in the user flow"
                        .into(),
                ),
            );
        }
        [user, wizard]
    }

    fn role_flow(&mut self, role: &str, pages: &[Page]) -> Vec<Option<Condition>> {
        let base = format!("/flow/{role}");
        let ids: HashMap<&str, usize> = pages
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.id.as_deref().map(|id| (id, i)))
            .collect();
        self.unique("page", &base, pages.iter().filter_map(|p| p.id.as_deref()));
        // Where each page may lead: its jump, or the next page; a page with a condition may
        // also be skipped, and a completion page ends the flow.
        let mut edges: Vec<Vec<usize>> = vec![vec![]; pages.len() + 1];
        for (i, p) in pages.iter().enumerate() {
            let ptr = format!("{base}/{i}");
            if let Some(id) = &p.id
                && (id.is_empty()
                    || !id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            {
                self.err(
                    &format!("{ptr}/id"),
                    format!("page id `{id}` must be letters, digits, `_` or `-`"),
                    None,
                );
            }
            let after = self.page_next(&ptr, i, p, &ids);
            if p.kind != PageKind::Completion {
                edges[i].push(after);
            }
            if p.when.is_some() {
                edges[i].push(i + 1);
            }
            self.page_kind(&ptr, p);
        }
        self.unreachable_pages(&base, pages, &edges);
        self.page_conditions(&base, pages, &edges)
    }

    /// The page that page `i` leads to: the one its `next` names (reported when unknown), else
    /// the next one.
    fn page_next(&mut self, ptr: &str, i: usize, p: &Page, ids: &HashMap<&str, usize>) -> usize {
        match &p.next {
            Some(target) => match ids.get(target.as_str()) {
                Some(&j) => j,
                None => {
                    let hint = did_you_mean(target, ids.keys().copied())
                        .or_else(|| Some("`next` names a page by its `id`".into()));
                    self.err(
                        &format!("{ptr}/next"),
                        format!("`next` names unknown page `{target}`"),
                        hint,
                    );
                    i + 1
                }
            },
            None => i + 1,
        }
    }

    /// Reports the pages that cannot be reached from the first one along `edges`.
    fn unreachable_pages(&mut self, base: &str, pages: &[Page], edges: &[Vec<usize>]) {
        let mut seen = vec![false; pages.len() + 1];
        let mut queue = VecDeque::from([0]);
        while let Some(i) = queue.pop_front() {
            if i >= seen.len() || std::mem::replace(&mut seen[i], true) {
                continue;
            }
            queue.extend(edges[i].iter().copied());
        }
        for (i, p) in pages.iter().enumerate() {
            if !seen[i] {
                self.err(
                    &format!("{base}/{i}"),
                    format!(
                        "page {} is unreachable",
                        p.id.as_deref().map_or_else(
                            || format!("{i} ({})", kind_name(p.kind)),
                            |id| format!("`{id}`")
                        )
                    ),
                    Some(
                        "the page before it jumps elsewhere or ends the flow; give it an `id` \
                         and jump to it with `next`, or remove it"
                            .into(),
                    ),
                );
            }
        }
    }

    /// Compiles the pages' conditions; the answers they read must be asked on a page that can
    /// come before.
    fn page_conditions(
        &mut self,
        base: &str,
        pages: &[Page],
        edges: &[Vec<usize>],
    ) -> Vec<Option<Condition>> {
        let mut asked_before: Vec<HashSet<&str>> = vec![HashSet::new(); pages.len()];
        for (j, target) in asked_before.iter_mut().enumerate() {
            for (i, p) in pages.iter().enumerate() {
                if i != j && leads_to(edges, i, j) {
                    target.extend(p.questions.iter().map(|q| q.id.as_str()));
                }
            }
        }
        let all_asked: HashSet<&str> = pages
            .iter()
            .flat_map(|p| p.questions.iter().map(|q| q.id.as_str()))
            .collect();
        pages
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let src = p.when.as_deref()?;
                let ptr = format!("{base}/{i}/when");
                let c = self.flow_condition(&ptr, src)?;
                self.answers_read(&ptr, src, &asked_before[i], &all_asked);
                Some(c)
            })
            .collect()
    }

    /// Reports each answer the condition `src` reads that is not asked before its page.
    fn answers_read(
        &mut self,
        ptr: &str,
        src: &str,
        asked_before: &HashSet<&str>,
        all_asked: &HashSet<&str>,
    ) {
        for name in member_names(src, "answers") {
            if !asked_before.contains(name.as_str()) {
                let (msg, hint) = if all_asked.contains(name.as_str()) {
                    (
                        format!("condition reads answer `{name}` before it is asked"),
                        "the question is on this page or a later one".to_string(),
                    )
                } else {
                    (
                        format!("condition reads answer `{name}`, which no page asks"),
                        did_you_mean(&name, asked_before.iter().copied()).unwrap_or_else(|| {
                            "`answers.ID` reads the question `ID` of an earlier `questions` page"
                                .into()
                        }),
                    )
                };
                self.err(ptr, msg, Some(hint));
            }
        }
    }

    fn flow_condition(&mut self, ptr: &str, src: &str) -> Option<Condition> {
        match Condition::compile(src) {
            Err(e) => {
                self.err(
                    ptr,
                    format!("condition `{src}` does not parse: {e}"),
                    Some("conditions are CEL expressions, e.g. `answers.age >= 18`".into()),
                );
                None
            }
            Ok(c) => {
                let bound = comprehension_vars(src);
                for v in c.variables() {
                    if !FLOW_VARS.contains(&v.as_str()) && !bound.contains(&v) {
                        let hint =
                            did_you_mean(&v, FLOW_VARS.iter().copied()).unwrap_or_else(|| {
                                format!("page conditions read: {}", FLOW_VARS.join(", "))
                            });
                        self.err(
                            ptr,
                            format!("condition names unknown variable `{v}`"),
                            Some(hint),
                        );
                    }
                }
                Some(c)
            }
        }
    }

    /// What each kind of page needs.
    fn page_kind(&mut self, ptr: &str, p: &Page) {
        let ev = self.study.evaluation.as_ref();
        if p.kind == PageKind::Questions {
            if p.questions.is_empty() {
                self.err(
                    ptr,
                    "a `questions` page needs `questions`".into(),
                    Some("list the questions, or use an `instructions` page".into()),
                );
            }
            for problem in questions::rules::check(&p.questions, &format!("{ptr}/questions")) {
                self.err(&problem.pointer, problem.message, problem.hint);
            }
        } else if !p.questions.is_empty() {
            self.err(
                &format!("{ptr}/questions"),
                format!("a `{}` page does not ask `questions`", kind_name(p.kind)),
                Some("put them on a `questions` page".into()),
            );
        }
        let need = match p.kind {
            PageKind::Rate => ev
                .is_none_or(|e| {
                    !matches!(e.task, EvalTask::Rate | EvalTask::SelfDialog | EvalTask::Spans | EvalTask::TurnActs)
                })
                .then_some("a `rate` page needs an `evaluation` section with `task: rate`, `self_dialog`, `spans` or `turn_acts`"),
            PageKind::Compare => ev
                .is_none_or(|e| e.task != EvalTask::Compare)
                .then_some("a `compare` page needs an `evaluation` section with `task: compare`"),
            PageKind::Chat => ev
                .is_none_or(|e| e.task != EvalTask::Chat)
                .then_some("a `chat` page needs an `evaluation` section with `task: chat`"),
            PageKind::Arena => ev
                .is_none_or(|e| e.task != EvalTask::Arena)
                .then_some("an `arena` page needs an `evaluation` section with `task: arena`"),
            PageKind::Onboarding => ev
                .is_none_or(|e| e.onboarding.is_none())
                .then_some("an `onboarding` page needs `evaluation.onboarding`"),
            PageKind::Desk => ev
                .is_none_or(|e| !matches!(e.task, EvalTask::Chat | EvalTask::Arena))
                .then_some(
                    "a `desk` page needs an `evaluation` section with `task: chat` or `task: arena`",
                ),
            _ => None,
        };
        if let Some(msg) = need {
            self.err(&format!("{ptr}/kind"), msg.into(), None);
        }
    }

    fn evaluation(&mut self, ev: &Evaluation) {
        self.dialogue_ids(ev);
        self.store_selections(ev);
        let dialogues = KnownDialogues::of(ev);
        match ev.task {
            EvalTask::Compare => self.compare_task(ev, &dialogues),
            EvalTask::Rate => self.rate_task(ev, &dialogues),
            EvalTask::Chat | EvalTask::Arena => self.live_evaluation(ev),
            EvalTask::SelfDialog | EvalTask::Spans | EvalTask::TurnActs => {
                for problem in ev.writing_problems() {
                    self.err(&problem.0, problem.1, None);
                }
            }
        }
        self.evaluation_questions(ev);
        if let Some(a) = ev.annotate.as_ref().filter(|_| !ev.task.is_live()) {
            let speaks = ev
                .dialogues
                .iter()
                .any(|d| d.turns.iter().any(|t| t.speaker == a.speaker));
            let stored_speaker =
                dialogues.stored && ["user", "wizard"].contains(&a.speaker.as_str());
            if !speaks && !stored_speaker {
                self.err(
                    "/evaluation/annotate/speaker",
                    format!("no dialogue has a turn by `{}`", a.speaker),
                    None,
                );
            }
            self.annotation_shape(a);
        }
        self.known_item_lists(ev, &dialogues);
        if !dialogues.stored
            && ev
                .items()
                .iter()
                .all(|i| i.pool != crate::event::ItemPool::Item)
        {
            self.no_items(ev.task);
        }
    }

    /// The evaluation's dialogues: each id once, and each with turns.
    fn dialogue_ids(&mut self, ev: &Evaluation) {
        let inline = ev.dialogues.len() - self.file_dialogues;
        let dialogue_ptr = |i: usize| {
            if i < inline {
                format!("/evaluation/dialogues/{i}")
            } else {
                "/evaluation/dialogues_file".to_string()
            }
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, d) in ev.dialogues.iter().enumerate() {
            if let Some(first) = seen.insert(d.id.as_str(), i) {
                self.err(
                    &dialogue_ptr(i),
                    format!("duplicate dialogue id `{}`", d.id),
                    Some(format!("the first is dialogue {first}; ids must be unique")),
                );
            }
            if d.turns.is_empty() {
                self.err(
                    &dialogue_ptr(i),
                    format!("dialogue `{}` has no turns", d.id),
                    None,
                );
            }
        }
    }

    /// A comparison's pairs, each of two different known dialogues, and no `items`.
    fn compare_task(&mut self, ev: &Evaluation, dialogues: &KnownDialogues<'_>) {
        match &ev.pairs {
            None => self.err(
                "/evaluation",
                "a comparison needs `pairs`".into(),
                Some("`pairs: {rule: all_systems}` or `pairs: {given: [{a: ID, b: ID}]}`".into()),
            ),
            Some(pairs) => {
                for (i, p) in pairs.given.iter().enumerate() {
                    let ptr = format!("/evaluation/pairs/given/{i}");
                    dialogues.check(self, &format!("{ptr}/a"), &p.a);
                    dialogues.check(self, &format!("{ptr}/b"), &p.b);
                    if p.a == p.b {
                        self.err(&ptr, "a pair compares two different dialogues".into(), None);
                    }
                }
                if pairs.given.is_empty() && pairs.rule.is_none() {
                    self.err(
                        "/evaluation/pairs",
                        "`pairs` needs `given` pairs or a `rule`".into(),
                        None,
                    );
                }
            }
        }
        if ev.items.is_some() {
            self.err(
                "/evaluation/items",
                "`items` lists dialogues to rate; a comparison's items are its `pairs`".into(),
                None,
            );
        }
    }

    /// A rating study: no `pairs`, known dialogues as `items`, and questions to ask.
    fn rate_task(&mut self, ev: &Evaluation, dialogues: &KnownDialogues<'_>) {
        if ev.pairs.is_some() {
            self.err(
                "/evaluation/pairs",
                "`pairs` are for `task: compare`".into(),
                Some("a rating study lists its dialogues under `items` (or rates them all)".into()),
            );
        }
        for (i, id) in ev.items.iter().flatten().enumerate() {
            dialogues.check(self, &format!("/evaluation/items/{i}"), id);
        }
        if ev.questions.is_empty() && ev.annotate.is_none() {
            self.err(
                "/evaluation",
                "a rating study needs `questions` (or `annotate`)".into(),
                None,
            );
        }
    }

    /// The evaluation's questions: their rules, and no id the judging form uses itself.
    fn evaluation_questions(&mut self, ev: &Evaluation) {
        for problem in questions::rules::check(&ev.questions, "/evaluation/questions") {
            self.err(&problem.pointer, problem.message, problem.hint);
        }
        for (i, q) in ev.questions.iter().enumerate() {
            if RESERVED_FIELDS.contains(&q.id.as_str()) || q.id.starts_with("turn") {
                self.err(
                    &format!("/evaluation/questions/{i}/id"),
                    format!("question id `{}` is used by the judging form itself", q.id),
                    Some("choose another id".into()),
                );
            }
        }
    }

    /// The onboarding's and gold's items with known answers: some of each, naming known
    /// dialogues and answering the questions.
    fn known_item_lists(&mut self, ev: &Evaluation, dialogues: &KnownDialogues<'_>) {
        let question_ids: Vec<&str> = ev.questions.iter().map(|q| q.id.as_str()).collect();
        let known_lists = ev
            .onboarding
            .iter()
            .map(|o| ("/evaluation/onboarding/items", &o.items))
            .chain(ev.gold.iter().map(|g| ("/evaluation/gold/items", &g.items)));
        for (base, items) in known_lists {
            if items.is_empty() {
                self.err(base, "no items with known answers".into(), None);
            }
            for (i, k) in items.iter().enumerate() {
                let ptr = format!("{base}/{i}");
                for id in k.dialogues() {
                    dialogues.check(self, &ptr, &id);
                }
                self.known_item(&ptr, ev.task, k, &question_ids);
            }
        }
    }

    /// The evaluation has no items to judge: what to check, by its task.
    fn no_items(&mut self, task: EvalTask) {
        self.err(
            "/evaluation",
            "the evaluation has no items to judge".into(),
            Some(match task {
                EvalTask::Compare => "no pair could be formed: check `pairs` and the dialogues' systems and scenarios".into(),
                EvalTask::Rate => "every dialogue is used by onboarding or gold items".into(),
                EvalTask::Chat => "declare `systems` and list them in `evaluation.systems`".into(),
                EvalTask::Arena => "an arena needs at least two systems in `evaluation.systems`".into(),
                EvalTask::SelfDialog => "list the scenarios in `self_dialog.scenarios`".into(),
                EvalTask::Spans => "give the dialogues to annotate in `dialogues` or `from_store`".into(),
                EvalTask::TurnActs => "give the dialogues in `dialogues` or `from_store`; check `acts.which` selects some of their turns".into(),
            }),
        );
    }

    /// The stored-session selections: a study to read from, and values that name something.
    fn store_selections(&mut self, ev: &Evaluation) {
        let Some(from) = &ev.from_store else {
            return;
        };
        if from.selections().is_empty() {
            self.err(
                "/evaluation/from_store",
                "`from_store` lists no selection".into(),
                Some("`from_store: {study: import:taskmaster1}`".into()),
            );
        }
        for (i, sel) in from.selections().iter().enumerate() {
            let ptr = match from {
                FromStore::One(_) => "/evaluation/from_store".to_string(),
                FromStore::Many(_) => format!("/evaluation/from_store/{i}"),
            };
            if sel.study.trim().is_empty() {
                self.err(
                    &format!("{ptr}/study"),
                    "`study` names the study whose stored sessions are taken".into(),
                    Some(
                        "an imported dataset's sessions are in study `import:<format>`, e.g. \
                         `import:crosswoz`"
                            .into(),
                    ),
                );
            }
            for (name, value) in [("system", &sel.system), ("scenario", &sel.scenario)] {
                let empty = match value {
                    Some(StoreValue::Fixed(v)) => v.trim().is_empty(),
                    Some(StoreValue::Field { annotation, field }) => {
                        annotation.trim().is_empty() || field.trim().is_empty()
                    }
                    None => false,
                };
                if empty {
                    self.err(
                        &format!("{ptr}/{name}"),
                        format!("`{name}` is empty"),
                        Some(format!(
                            "a name, or `{{annotation: KEY, field: NAME}}` to read it from each \
                             session; leave `{name}` out for the default"
                        )),
                    );
                }
            }
        }
    }

    /// Per-turn annotation has what its kind needs: options for checkboxes, a scale's points.
    fn annotation_shape(&mut self, a: &crate::evaluation::TurnAnnotation) {
        match a.kind {
            AnnotationKind::Checkboxes if a.options.is_empty() => self.err(
                "/evaluation/annotate",
                "checkbox annotation needs `options`".into(),
                None,
            ),
            AnnotationKind::Scale if !SCALE_POINTS.contains(&a.points()) => self.err(
                "/evaluation/annotate/points",
                format!(
                    "a scale has {} to {} points",
                    SCALE_POINTS.start(),
                    SCALE_POINTS.end()
                ),
                None,
            ),
            _ => {}
        }
        for (i, only) in a.exclusive.iter().enumerate() {
            let ptr = format!("/evaluation/annotate/exclusive/{i}");
            if a.kind != AnnotationKind::Checkboxes {
                self.err(
                    &ptr,
                    "`exclusive` options are for checkbox annotation".into(),
                    None,
                );
            } else if !a.options.contains(only) {
                let hint = did_you_mean(only, a.options.iter().map(String::as_str))
                    .or_else(|| Some("name one of `options`".into()));
                self.err(&ptr, format!("`{only}` is not one of the options"), hint);
            }
        }
    }

    /// The study's `systems`: valid specs and names an item id can hold.
    fn systems(&mut self) {
        for (name, spec) in &self.study.systems {
            let ptr = format!("/systems/{name}");
            if name.trim().is_empty() || name.contains('~') || name.len() > 64 {
                self.err(
                    &ptr,
                    format!("system name `{name}` must be 1 to 64 characters without `~`"),
                    None,
                );
            }
            if let Err(message) = spec.validate() {
                self.err(&ptr, message, Some("see docs/bots.md".into()));
            }
        }
        self.desk();
    }

    /// `human` systems and the `desk` page where wizards answer for them go together: a desk
    /// only in the wizard flow, a human system only with a desk to answer at.
    fn desk(&mut self) {
        let study = self.study;
        let is_desk = |p: &Page| p.kind == PageKind::Desk;
        if let Some(i) = study.flow.user.iter().position(is_desk) {
            self.err(
                &format!("/flow/user/{i}/kind"),
                "a `desk` page belongs in the wizard flow".into(),
                Some("wizards answer for `human` systems at the desk; users chat on `chat` or `arena` pages".into()),
            );
        }
        let human = study
            .systems
            .iter()
            .find(|(_, spec)| matches!(spec, crate::systems::SystemSpec::Human(_)))
            .map(|(name, _)| name.clone());
        let desk = study.flow.wizard.iter().position(is_desk);
        match (human, desk) {
            (Some(name), None) => self.err(
                &format!("/systems/{name}"),
                format!("`human` system `{name}` has no `desk` page to be answered at"),
                Some("add `{kind: desk}` to `flow.wizard`; wizards join by a lab link with `role=wizard`".into()),
            ),
            (None, Some(i)) => self.err(
                &format!("/flow/wizard/{i}/kind"),
                "a `desk` page needs a system of `kind: human`".into(),
                Some("declare one under the study's `systems`, or remove the page".into()),
            ),
            _ => {}
        }
    }

    /// A `chat` or `arena` evaluation: systems that exist, turn limits that fit, annotation of
    /// the systems' replies, and none of the written-dialogue fields.
    fn live_evaluation(&mut self, ev: &Evaluation) {
        let task = if ev.task == EvalTask::Arena {
            "arena"
        } else {
            "chat"
        };
        self.live_systems(ev, task);
        let c = &ev.conversation;
        if c.min_turns > c.max_turns {
            self.err(
                "/evaluation/conversation/min_turns",
                format!(
                    "`min_turns` ({}) is more than `max_turns` ({})",
                    c.min_turns, c.max_turns
                ),
                None,
            );
        }
        self.written_fields(ev, task);
        if let Some(a) = &ev.annotate {
            if a.speaker != SYSTEM_SPEAKER {
                self.err(
                    "/evaluation/annotate/speaker",
                    format!(
                        "in a `{task}` the systems' replies are annotated: `speaker: {SYSTEM_SPEAKER}`"
                    ),
                    None,
                );
            }
            self.annotation_shape(a);
        }
    }

    /// The systems of a `chat` or `arena` (`task`): declared, each once, enough of them, and a
    /// `schedule` only for an arena.
    fn live_systems(&mut self, ev: &Evaluation, task: &str) {
        let declared: Vec<&str> = self.study.systems.keys().map(String::as_str).collect();
        for (i, name) in ev.systems.iter().enumerate() {
            if !declared.contains(&name.as_str()) {
                let hint = did_you_mean(name, declared.iter().copied())
                    .or_else(|| Some("declare it under the study's `systems`".into()));
                self.err(
                    &format!("/evaluation/systems/{i}"),
                    format!("unknown system `{name}`"),
                    hint,
                );
            }
        }
        self.unique(
            "system",
            "/evaluation/systems",
            ev.systems.iter().map(String::as_str),
        );
        let fewest = if ev.task == EvalTask::Arena { 2 } else { 1 };
        if ev.systems.len() < fewest {
            self.err(
                "/evaluation",
                format!(
                    "a `{task}` evaluation needs at least {fewest} system{}; it has {}",
                    if fewest == 1 { "" } else { "s" },
                    ev.systems.len()
                ),
                Some(
                    "declare them under the study's `systems` (or give them at start with \
                     `serve --system NAME=URL`)"
                        .into(),
                ),
            );
        }
        if ev.task == EvalTask::Chat && ev.schedule != crate::evaluation::Schedule::Balanced {
            self.err(
                "/evaluation/schedule",
                "`schedule` chooses between pairs of systems: it is for `task: arena`".into(),
                Some("a chat gives every system the same number of conversations".into()),
            );
        }
    }

    /// Reports the fields of written dialogues set in a `chat` or `arena` (`task`).
    fn written_fields(&mut self, ev: &Evaluation, task: &str) {
        let written = [
            ("dialogues", !ev.dialogues.is_empty()),
            ("dialogues_file", ev.dialogues_file.is_some()),
            ("from_store", ev.from_store.is_some()),
            ("pairs", ev.pairs.is_some()),
            ("items", ev.items.is_some()),
            ("onboarding", ev.onboarding.is_some()),
            ("gold", ev.gold.is_some()),
        ];
        for (field, set) in written {
            if set {
                self.err(
                    &format!("/evaluation/{field}"),
                    format!(
                        "`{field}` is for rating or comparing written dialogues, not a `{task}`"
                    ),
                    Some("participants of a chat or arena talk to the `systems` instead".into()),
                );
            }
        }
    }

    fn known_item(&mut self, ptr: &str, task: EvalTask, k: &KnownItem, question_ids: &[&str]) {
        match task {
            EvalTask::Chat
            | EvalTask::Arena
            | EvalTask::SelfDialog
            | EvalTask::Spans
            | EvalTask::TurnActs => {}
            EvalTask::Compare => {
                let (Some(a), Some(b)) = (&k.a, &k.b) else {
                    self.err(
                        ptr,
                        "a known comparison names dialogues `a` and `b`".into(),
                        None,
                    );
                    return;
                };
                match &k.better {
                    Some(better) if better == a || better == b => {}
                    _ => self.err(
                        ptr,
                        "`better` must name `a` or `b`: the dialogue a careful worker picks".into(),
                        None,
                    ),
                }
                if k.dialogue.is_some() || !k.expect.is_empty() {
                    self.err(
                        ptr,
                        "`dialogue` and `expect` are for rating studies".into(),
                        None,
                    );
                }
            }
            EvalTask::Rate => {
                if k.dialogue.is_none() || k.a.is_some() || k.b.is_some() || k.better.is_some() {
                    self.err(
                        ptr,
                        "a known rating names one `dialogue` and what to `expect`".into(),
                        None,
                    );
                }
                if k.expect.is_empty() {
                    self.err(ptr, "`expect` at least one answer range".into(), None);
                }
                for q in k.expect.keys() {
                    if !question_ids.contains(&q.as_str()) {
                        let hint = did_you_mean(q, question_ids.iter().copied());
                        self.err(
                            &format!("{ptr}/expect/{q}"),
                            format!("`expect` names unknown question `{q}`"),
                            hint,
                        );
                    }
                }
            }
        }
    }
}

/// Whether page `to` can follow page `from` (through any number of pages).
fn leads_to(edges: &[Vec<usize>], from: usize, to: usize) -> bool {
    let mut seen = vec![false; edges.len()];
    let mut queue: VecDeque<usize> = edges[from].iter().copied().collect();
    while let Some(i) = queue.pop_front() {
        if i == to {
            return true;
        }
        if i >= edges.len() || std::mem::replace(&mut seen[i], true) {
            continue;
        }
        queue.extend(edges[i].iter().copied());
    }
    false
}

/// The name authors write in `kind:`.
pub fn kind_name(kind: PageKind) -> &'static str {
    match kind {
        PageKind::Consent => "consent",
        PageKind::Instructions => "instructions",
        PageKind::Waiting => "waiting",
        PageKind::Room => "room",
        PageKind::Survey => "survey",
        PageKind::Completion => "completion",
        PageKind::Questions => "questions",
        PageKind::Onboarding => "onboarding",
        PageKind::Rate => "rate",
        PageKind::Compare => "compare",
        PageKind::Chat => "chat",
        PageKind::Arena => "arena",
        PageKind::Desk => "desk",
    }
}
