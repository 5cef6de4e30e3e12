# Interface strings of the participant's pages in English (the default). Every key here is in
# every other catalogue too (a unit test in src/i18n.rs checks it). Keys starting `room-js-`,
# `waiting-js-`, `chat-js-` and `sp-js-` are handed to assets/room.js, assets/waiting.js,
# assets/chat.js and assets/selfdialog.js; their variables become
# `{name}` holes that the script fills.

## MTurk's preview of the task (before the worker accepts it)

preview-accept = Accept the task to take part.

## Consent and instructions

consent-title = Consent
consent-accept = I agree and want to take part
instructions-title = Instructions
instructions-role = Your role:
instructions-continue = I have read this — continue

## Waiting room

waiting-title = Waiting for a partner
waiting-connecting = Connecting…
waiting-keep-open = Keep this tab open. You will be moved on automatically.
waiting-js-default = Waiting for a partner…
waiting-js-time = { $words } { $waited } (at most { $limit })
waiting-js-paired = Partner found. Starting…
waiting-js-no-partner = No partner was found.
waiting-js-reassigned = You now take the other role.
waiting-js-lost = Connection lost. Reconnecting…
# Errors over the waiting room's socket, by their code.
waiting-js-error-replaced = You are waiting in another tab.
waiting-js-error-internal = The server could not do that. Please reload the page.

## The room page

room-you-are = You are
room-progress = Progress
room-time-left = Time left
room-finish = Finish
room-ended = The conversation has ended.
room-ended-read = Take your time to read the chat, then continue.
room-continue = Continue
room-chat-with = Chat with { $partner }
room-message = Message
room-send = Send
room-what-to-say = What to say
room-hint = Hint
room-always = Always available
room-robot-actions = Robot actions
room-action = Action
room-robot = Robot
room-where = Where
room-start = Start
room-approve = Approve
room-deny = Deny
room-robots = Robots
room-map = Map
room-copilot = Suggested reply
room-copilot-send = Send as it is
room-copilot-edit = Edit
room-copilot-dismiss = Dismiss
room-your-task = Your task

## The room's script

room-js-connecting = connecting…
room-js-connected = connected
room-js-reconnecting = reconnecting…
room-js-observing = observing
room-js-not-connected = Not connected. Reconnecting…
room-js-you = You
room-js-free-text = free text
room-js-act-request = request
room-js-act-interaction = interaction
room-js-act-action = action
room-js-act-update = update
room-js-action-started = { $robot }: { $action } started
room-js-action-started-to = { $robot }: { $action } → { $place } started
room-js-action-finished = { $robot } finished
room-js-action-finished-at = { $robot } finished at { $place }
room-js-milestone = Milestone: { $subtask } ({ $progress }%)
room-js-approved = Approved
room-js-denied = Denied
room-js-ended = The conversation has ended.
room-js-selected = Selected in { $table }: { $key }
room-js-partner-lost = Your partner lost the connection. Waiting for them to come back…
room-js-partner-lost-countdown = Your partner lost the connection. Waiting { $countdown } for them to come back…
room-js-battery = battery { $percent }%
room-js-busy = { $action } ({ $percent }%, { $eta } s left)
room-js-standby = on standby
room-js-out-of-service = out of service
room-js-waiting-user = Waiting for the user…
room-js-no-option = No dialogue option right now: use the buttons below or type.
room-js-lock-approval = Waiting for the user to approve or deny.
room-js-lock-reply = Waiting for the user to reply.
room-js-no-actions = No actions in this study.
room-js-not-possible = Not possible now
room-js-no-action-possible = No action is possible now. { $reason }
room-js-wait-for-partner = Wait for { $partner } to start the conversation
room-js-your-partner = your partner
room-js-placeholder = Type a message and press Enter
room-js-approve-prompt = Do you approve?
room-js-goal-title = Your goal
room-js-goal-done = (done)
room-js-database = Database
room-js-table = Table
room-js-search = Search
room-js-how-to-match = { $column }: how to match
room-js-contains = contains
room-js-equals = is
room-js-from = from
room-js-to = to
room-js-column-from = { $column } from
room-js-column-to = { $column } to
room-js-nothing-found = Nothing found.
room-js-use = Use
room-js-typing = { $partner } is typing…
room-js-taken-over = A researcher has taken over your place in this conversation while you were away,
room-js-taken-over-rest = so you cannot rejoin it. Thank you for taking part.
room-js-finish = Finish
room-js-finish-confirm = Click again to end

## The room's script: refusals of the engine, by kind (the server's message otherwise)

room-js-refused-not-started = the session has not started
room-js-refused-ended = the session has ended
room-js-refused-not-offered = that option is not offered now
room-js-refused-locked = waiting for the user's answer
room-js-refused-no-lock = there is nothing to approve or deny
room-js-refused-muted-until-wizard = wait for the assistant's first message
room-js-refused-empty-text = the message is empty
room-js-refused-text-too-long = the message is longer than { $max } characters
room-js-refused-finish-not-allowed = finishing is not allowed yet
room-js-refused-no-hint = there is nothing to hint
room-js-refused-target-required = this action needs a target location
room-js-refused-target-not-taken = “{ $action }” takes no target location
room-js-refused-out-of-service = { $robot } is out of service
room-js-refused-robot-busy = { $robot } is busy
room-js-refused-other-robot-active = { $selected } cannot start “{ $action }” yet: { $robot } is still at work, and only one robot may work at a time
room-js-refused-lacks-capability = { $robot } cannot do “{ $action }”
room-js-refused-guard-failed = “{ $action }” is not possible now
room-js-refused-no-database = this study has no database
room-js-refused-suggestion-closed = that suggestion is no longer open; send your message without it
# Errors over the room's socket that are not refusals, by their code.
room-js-error-seat-taken = A researcher has taken over your place in this conversation while you were away, so you cannot rejoin it. Thank you for taking part.
room-js-error-not-saved = Your last action could not be saved, so it did not happen: the server cannot store anything right now. Please wait a moment and try again.
room-js-error-internal = The server could not do that. Please reload the page.
room-js-error-unavailable = The conversation's server cannot be reached right now. Reconnecting…
room-js-error-rate-limited = Too many messages at once. Please slow down.

## Questionnaire

survey-title = Questionnaire
survey-submit = Submit
survey-end-no-partner = No partner could be found in time, so there was no conversation.
survey-end-partner-left = Your partner lost the connection and did not come back in time, so the conversation ended early.
survey-end-me-left = Your connection was lost for too long, so the conversation ended early.
survey-end-lost = The connection was lost for too long, so the conversation ended early.

## Questions (questionnaires and questions pages)

question-optional = (optional)
question-choose-all = Choose all that apply.
question-choose-between = Choose { $lo } to { $hi }.
question-choose-at-least = Choose at least { $lo }.
question-choose-at-most = Choose at most { $hi }.
question-words-between = { $lo } to { $hi } words.
question-words-at-least = At least { $lo } words.
question-words-at-most = At most { $hi } words.
question-whole = A whole number.
question-whole-between = A whole number, { $lo } to { $hi }.
question-whole-at-least = A whole number, at least { $lo }.
question-whole-at-most = A whole number, at most { $hi }.
question-number-between = A number, { $lo } to { $hi }.
question-number-at-least = A number, at least { $lo }.
question-number-at-most = A number, at most { $hi }.
question-rank = Give each option a different rank: 1 for the first, { $count } for the last.

## Completion

completion-title = Thank you
completion-no-partner = No partner could be found in time. You are paid for waiting: please submit the code below.
completion-mturk-submit = Submit the task to MTurk
completion-code = Your completion code:
completion-no-prolific-code = This study has no Prolific completion code for how your part ended. Please send the code below to the researcher through Prolific's messages; you will be paid as the study says.
completion-return = Return to the study platform
completion-return-auto = (automatically in { $seconds } seconds)
completion-stay = Stay on this page

## Why a questionnaire's answer is refused, next to its question.
answer-missing = Please answer this question.
answer-missing-rows = Please answer every row.
answer-missing-ranks = Please rank the options.
answer-several-point = Choose one point.
answer-several-option = Choose one option.
answer-several-answer = Send one answer.
answer-several-number = Send one number.
answer-several-row-point = Choose one point in each row.
answer-several-rank = Give each option one rank.
answer-point = Choose a point from 1 to { $points }.
answer-row-point = Choose a point from 1 to { $points } in each row.
answer-not-an-option = Choose one of the options.
answer-not-shown = Choose only from the options shown.
answer-choose-exactly = Choose exactly { $count } { $count ->
    [one] option
   *[other] options
}.
answer-choose-between = Choose between { $min } and { $max } options.
answer-choose-at-most = Choose at most { $count } { $count ->
    [one] option
   *[other] options
}.
answer-choose-at-least = Choose at least { $count } { $count ->
    [one] option
   *[other] options
}.
answer-too-long = Please keep the answer under { $max } characters.
answer-words-between = Write between { $min } and { $max } words (you wrote { $wrote } { $wrote ->
    [one] word
   *[other] words
}).
answer-words-at-least = Write at least { $min } { $min ->
    [one] word
   *[other] words
} (you wrote { $wrote } { $wrote ->
    [one] word
   *[other] words
}).
answer-words-at-most = Write at most { $max } { $max ->
    [one] word
   *[other] words
} (you wrote { $wrote } { $wrote ->
    [one] word
   *[other] words
}).
answer-number-between = Enter { $whole ->
    [yes] a whole number
   *[no] a number
} from { $min } to { $max }.
answer-number-at-least = Enter { $whole ->
    [yes] a whole number
   *[no] a number
} of at least { $min }.
answer-number-at-most = Enter { $whole ->
    [yes] a whole number
   *[no] a number
} of at most { $max }.
answer-number-any = Enter { $whole ->
    [yes] a whole number
   *[no] a number
}.
answer-rows-left = Please answer every row ({ $left } { $left ->
    [one] row
   *[other] rows
} left).
answer-rank-each = Give each option a different rank from 1 to { $options }.
answer-rank-all = Give every option a rank from 1 to { $options }.

## Evaluation pages (questions, onboarding, rating, comparison)

eval-continue = Continue
eval-submit = Submit
eval-questions-title = A few questions
eval-practice-title = Practice
eval-practice-item = Practice { $n }
eval-conversation = Conversation
eval-the-conversation = The conversation
eval-conversation-side = Conversation { $side }
eval-turn-labels = Labels for this turn
eval-compare-title = Compare two conversations
eval-compare-question = Which of the two conversations is better?
eval-rate-title = Rate the conversation
eval-item-progress = Item { $item } of at most { $items } · please submit within { $minutes } minutes
eval-skip = Skip this one
eval-reason-prompt = Why? Please explain your choice briefly.
eval-ending-text = Thank you for your time.
eval-no-items-title = Nothing left to judge
eval-screened-title = Thank you

## What is wrong with an evaluation form sent back

eval-problem-choice = Choose one of the two conversations.
eval-problem-vote = Choose one of the answers.
eval-problem-reason = Please give a reason.
eval-problem-reason-words = Please give a reason of at least { $min } words.
eval-problem-reason-too-long = Please keep it under { $max } characters.
eval-problem-exclusive = “{ $only }” cannot be ticked together with “{ $others }”: untick one of them.
eval-problem-exclusive-joiner = {"”, “"}
eval-problem-tick-none = Tick at least one option for this message (“{ $none }” if none applies).
eval-problem-tick = Tick at least one option for this message.
eval-problem-scale = Choose a point of the scale for this message.

## Chat and arena pages

eval-chat-title = Chat with the assistant
eval-arena-title = Chat with two assistants
eval-chat-assistant = Assistant
eval-chat-assistant-a = Assistant A
eval-chat-assistant-b = Assistant B
eval-chat-you = You
eval-chat-reply-prompt = How was this reply?
eval-chat-feeling = Your feeling about this reply
eval-chat-satisfied = Satisfied
eval-chat-frustrated = Frustrated
eval-chat-typing = { $assistant } is typing…
eval-chat-failed = { $assistant } could not answer your last message.
eval-chat-retry = Try again
eval-chat-progress = Your messages: { $turns } (at least { $min }, at most { $max })
eval-chat-time-limit = time limit { $minutes } min
eval-chat-conversation-of = conversation { $n } of at most { $max }
eval-chat-time-up = The time for this conversation is up.
eval-chat-ended = The conversation has ended.
eval-chat-max = You have sent the most messages for this conversation.
eval-chat-your-message = Your message
eval-chat-placeholder = Type your message…
eval-chat-send = Send
eval-chat-end = End the conversation
eval-arena-finish = Finish and vote
eval-arena-question = Which assistant was better?
eval-arena-vote-left = Assistant A is better
eval-arena-vote-right = Assistant B is better
eval-arena-vote-tie = Tie: both are good
eval-arena-vote-both-bad = Both are bad
eval-chat-check-labels = Please check the labels of the last reply.
eval-chat-refused-ended = This conversation has ended.
eval-chat-refused-pending = Please wait for the reply before you write again.
eval-chat-refused-failed = An assistant did not answer your last message: press Try again first.
eval-chat-refused-empty = Write a message first.
eval-chat-refused-too-long = Please keep your message under { $max } characters.
eval-chat-refused-too-few = Please send at least { $min } messages before you end the conversation.
eval-chat-refused-wait = Please wait for the reply first.
eval-chat-refused-unsent = Your message has not been sent: send it, or clear the box, before you end the conversation.
eval-reveal-title = Thank you for your vote
eval-reveal-chose = You chose: { $choice }.
eval-reveal-side = { $assistant } was { $system }
eval-reveal-tie = a tie
eval-reveal-both-bad = both bad
eval-reveal-void = An assistant failed to answer during this conversation, so this vote does not count towards the leaderboard.

## The chat page's script

chat-js-not-sent = This message could not be sent.
chat-js-you = You

## Refusal and error pages

error-title-bad-request = Bad Request
error-title-unauthorized = Unauthorized
error-title-forbidden = Forbidden
error-title-not-found = Not Found
error-title-conflict = Conflict
error-title-too-many = Too Many Requests
error-title-server = Internal Server Error
error-not-found = This page does not exist.
error-too-many = Too many entry links were opened from your network in a short time. Please wait { $seconds } seconds, then open your link again: nothing is lost meanwhile.
error-store = The server could not save or read your data. Please try again in a moment.
error-other-site = This form must be sent from this site's page.
error-no-participation = Open the link you were given to take part: this browser has no participation in this study.
error-seat-taken = This worker id has already started this study in another browser or assignment. Please continue in the browser and from the link you started with; if that is not possible, contact the researcher.
error-blocklisted = This study is not open to your worker id. Thank you for your interest.
error-open-again = please open the link again

## Turn-act labelling page

acts-title = Label the highlighted turn
acts-so-far = The conversation so far
acts-submit = Submit the label
acts-legend = Dialogue acts of the highlighted turn (one or more)
acts-pairs = Slot-value pairs (optional)
acts-pairs-how = For each value the turn gives, choose its act (one of those ticked above) and its slot, and type the value or pick a word of the turn.
acts-act = Act
acts-slot = Slot
acts-value = Value
acts-pair-act = Act of pair { $n }
acts-pair-slot = Slot of pair { $n }
acts-pair-value = Value of pair { $n }
acts-not-saved = The label was not saved: { $problem }.
acts-list-sep = {", "}
acts-problem-unknown-act = “{ $act }” is not one of this task's acts ({ $known })
acts-problem-no-act = tick at least one dialogue act
acts-problem-act-not-ticked = pair { $row }: its act “{ $act }” is not one of the ticked acts ({ $ticked })
acts-problem-pair-no-act = pair { $row }: tick its act above first
acts-problem-unknown-slot = pair { $row }: the slot “{ $slot }” is not one of this task's slots ({ $known })
acts-problem-no-value = pair { $row }: give the value of the slot “{ $slot }”
acts-problem-too-long = pair { $row }: the value is longer than { $max } characters
acts-problem-same-pair = pair { $row }: the same pair is given twice

## Self-dialog writing page (`sd-`): both sides of a conversation, USER then ASSISTANT

sd-title = Write both sides of the conversation
sd-user = USER
sd-assistant = ASSISTANT
sd-fix = Fix the last turn ({ $speaker })
sd-fix-label = The last turn
sd-fix-save = Save the fix
sd-next = Turn { $turn }: { $speaker } says
sd-add = Add this turn
sd-full = The conversation has its { $max } turns: submit it.
sd-count = { $turns } turns written; between { $min } and { $max } are needed.
sd-count-more = { $turns } turns written; between { $min } and { $max } are needed ({ $missing } more before you can submit).
sd-submit = Submit the conversation

## What is wrong with a turn or a conversation sent back

sd-problem-turn = Turn { $n }: { $problem }.
sd-problem-empty = the turn is empty: write what is said
sd-problem-too-long = the turn is longer than { $max } characters
sd-problem-full = the dialogue has its { $max } turns: submit it
sd-problem-out-of-order = this turn cannot be written now: the next is turn { $next } (or edit the last)
sd-problem-wrong-speaker = this turn is spoken by { $speaker }
sd-problem-too-few = The conversation has { $turns } turns; write at least { $min } before submitting.
sd-problem-unsent = You have written a turn that is not added yet: add it, or clear it, before submitting the dialogue.

## Span marking page (`sp-`): spans of the utterances, each with a slot name

sp-title = Mark the details in the conversation
sp-characters = ({ $count } characters)
sp-remove = Remove
sp-none = No span marked yet.
sp-utterance = Utterance
sp-characters-head = Characters
sp-text = Text
sp-slot = Slot
sp-help = Select the words in an utterance, or give the utterance and the exact words (the first place they occur is marked), or the character offsets (from 0; the end is not included).
sp-words = Words
sp-from = From
sp-to = To
sp-mark = Mark
sp-submit = Submit the spans

## What is wrong with a span sent back

sp-problem-not-marked = The span was not marked: { $problem }.
sp-problem-number-turn = `turn` must be a whole number from 0, not "{ $value }"
sp-problem-number-start = `start` must be a whole number from 0, not "{ $value }"
sp-problem-number-end = `end` must be a whole number from 0, not "{ $value }"
sp-problem-turn = choose the utterance (`turn`)
sp-problem-slot = choose a slot name (`slot`)
sp-problem-missing = utterance { $turn } does not exist
sp-problem-not-found = utterance { $turn } does not contain "{ $words }"
sp-problem-offsets = give both offsets (`start` and `end`), or the words
sp-problem-no-turn = utterance { $turn } does not exist: the dialogue has { $turns } utterances (0 to { $last })
sp-problem-empty = the span { $start }..{ $end } is empty: the end must be after the start
sp-problem-past-end = the span ends at { $end }, past the end of the utterance ({ $len } characters)
sp-problem-unknown-slot = `{ $slot }` is not one of the study's slot names
sp-problem-text-mismatch = the offsets select "{ $found }", not the text given ("{ $given }")
sp-problem-remove = No such span to remove: { $count } are marked.
sp-problem-too-few = { $count } spans are marked; mark at least { $min } before submitting.
sp-problem-unsent = You have a span that is not marked yet: mark it, or clear its words and numbers, before submitting.

## The span page's script

sp-js-hint = Select words in an utterance to mark them.
sp-js-one-utterance = Select words within one utterance.
sp-js-selected = “{ $text }” (utterance { $turn }, characters { $start }–{ $end }): choose its slot and press Mark.
