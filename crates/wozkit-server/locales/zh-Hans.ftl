# Interface strings of the participant's pages in Simplified Chinese: the keys of en.ftl, each
# translated (see en.ftl for how the scripts read them).

## MTurk's preview of the task (before the worker accepts it)

preview-accept = 接受任务后即可参与。

## Consent and instructions

consent-title = 参与说明
consent-accept = 我同意并愿意参与
instructions-title = 说明
instructions-role = 你的角色：
instructions-continue = 我已阅读——继续

## Waiting room

waiting-title = 正在等待对方
waiting-connecting = 正在连接…
waiting-keep-open = 请不要关闭此页面，准备好后会自动进入下一步。
waiting-js-default = 正在等待对方…
waiting-js-time = { $words } 已等待 { $waited }（最长 { $limit }）
waiting-js-paired = 已找到对方，即将开始…
waiting-js-no-partner = 没有找到对方。
waiting-js-reassigned = 你现在改为扮演另一个角色。
waiting-js-lost = 连接已断开，正在重新连接…
waiting-js-error-replaced = 你正在另一个标签页中等待。
waiting-js-error-internal = 服务器没能完成这个操作，请刷新页面。

## The room page

room-you-are = 你的身份：
room-progress = 进度
room-time-left = 剩余时间
room-finish = 结束
room-ended = 对话已结束。
room-ended-read = 可以再看看聊天记录，然后继续。
room-continue = 继续
room-chat-with = 与{ $partner }聊天
room-message = 消息
room-send = 发送
room-what-to-say = 回复选项
room-hint = 提示
room-always = 常用回复
room-robot-actions = 机器人操作
room-action = 操作
room-robot = 机器人
room-where = 地点
room-start = 开始
room-approve = 同意
room-deny = 拒绝
room-robots = 机器人
room-map = 地图
room-copilot = 建议回复
room-copilot-send = 直接发送
room-copilot-edit = 编辑
room-copilot-dismiss = 忽略
room-your-task = 你的任务

## The room's script

room-js-connecting = 正在连接…
room-js-connected = 已连接
room-js-reconnecting = 正在重新连接…
room-js-observing = 旁观中
room-js-not-connected = 未连接，正在重新连接…
room-js-you = 你
room-js-free-text = 自由输入
room-js-act-request = 询问
room-js-act-interaction = 交互
room-js-act-action = 行动
room-js-act-update = 告知
room-js-action-started = { $robot }：开始{ $action }
room-js-action-started-to = { $robot }：开始{ $action } → { $place }
room-js-action-finished = { $robot }已完成
room-js-action-finished-at = { $robot }已在{ $place }完成
room-js-milestone = 阶段完成：{ $subtask }（{ $progress }%）
room-js-approved = 已同意
room-js-denied = 已拒绝
room-js-ended = 对话已结束。
room-js-selected = 已在{ $table }中选中：{ $key }
room-js-partner-lost = 对方的连接已断开，正在等待对方回来…
room-js-partner-lost-countdown = 对方的连接已断开，将等待 { $countdown }，看对方是否回来…
room-js-battery = 电量 { $percent }%
room-js-busy = { $action }（{ $percent }%，还需 { $eta } 秒）
room-js-standby = 待命
room-js-out-of-service = 停止服务
room-js-waiting-user = 正在等待对方回复…
room-js-no-option = 现在没有可选的回复：请使用下面的按钮或自己输入。
room-js-lock-approval = 正在等待对方同意或拒绝。
room-js-lock-reply = 正在等待对方回复。
room-js-no-actions = 本研究没有可执行的操作。
room-js-not-possible = 现在无法执行
room-js-no-action-possible = 现在没有可执行的操作。{ $reason }
room-js-wait-for-partner = 请等待{ $partner }开始对话
room-js-your-partner = 对方
room-js-placeholder = 输入消息，按回车发送
room-js-approve-prompt = 你同意吗？
room-js-goal-title = 你的目标
room-js-goal-done = （已完成）
room-js-database = 数据库
room-js-table = 表
room-js-search = 搜索
room-js-how-to-match = { $column }：匹配方式
room-js-contains = 包含
room-js-equals = 等于
room-js-from = 最低
room-js-to = 最高
room-js-column-from = { $column } 最低
room-js-column-to = { $column } 最高
room-js-nothing-found = 没有找到结果。
room-js-use = 选用
room-js-typing = { $partner }正在输入…
room-js-taken-over = 你离开期间，一位研究人员接替了你在这段对话中的位置，
room-js-taken-over-rest = 所以你无法再回到这段对话。感谢你的参与。
room-js-finish = 结束
room-js-finish-confirm = 再点一次以结束

## The room's script: refusals of the engine, by kind (the server's message otherwise)

room-js-refused-not-started = 对话还没有开始
room-js-refused-ended = 对话已经结束
room-js-refused-not-offered = 现在不能选这个选项
room-js-refused-locked = 正在等待对方回答
room-js-refused-no-lock = 现在没有需要同意或拒绝的事
room-js-refused-muted-until-wizard = 请等助手先发第一条消息
room-js-refused-empty-text = 消息是空的
room-js-refused-text-too-long = 消息超过了 { $max } 个字符
room-js-refused-finish-not-allowed = 现在还不能结束
room-js-refused-no-hint = 现在没有可提示的选项
room-js-refused-target-required = 这个操作需要选择目标地点
room-js-refused-target-not-taken = “{ $action }”不需要目标地点
room-js-refused-out-of-service = { $robot }已停止服务
room-js-refused-robot-busy = { $robot }正忙
room-js-refused-other-robot-active = { $selected }现在还不能开始“{ $action }”：{ $robot }仍在工作，同一时间只能有一台机器人工作
room-js-refused-lacks-capability = { $robot }不能执行“{ $action }”
room-js-refused-guard-failed = 现在不能执行“{ $action }”
room-js-refused-no-database = 这项研究没有数据库
room-js-refused-suggestion-closed = 这条建议已失效，请直接发送你的消息
room-js-error-seat-taken = 你离开期间，研究人员接替了你在这段对话中的位置，所以你不能再回到这段对话。感谢你的参与。
room-js-error-not-saved = 你的上一个操作没能保存，所以没有生效：服务器现在无法存储任何内容。请稍等片刻再试。
room-js-error-internal = 服务器没能完成这个操作，请刷新页面。
room-js-error-unavailable = 暂时无法连接到这段对话的服务器，正在重新连接…
room-js-error-rate-limited = 消息发送得太快了，请放慢一些。

## Questionnaire

survey-title = 问卷
survey-submit = 提交
survey-end-no-partner = 没能及时找到对方，所以没有进行对话。
survey-end-partner-left = 对方的连接断开后没有及时回来，所以对话提前结束了。
survey-end-me-left = 你的连接断开时间过长，所以对话提前结束了。
survey-end-lost = 连接断开时间过长，所以对话提前结束了。

## Questions (questionnaires and questions pages)

question-optional = （选填）
question-choose-all = 可多选。
question-choose-between = 请选择 { $lo } 到 { $hi } 项。
question-choose-at-least = 请至少选择 { $lo } 项。
question-choose-at-most = 最多选择 { $hi } 项。
question-words-between = { $lo } 到 { $hi } 个词。
question-words-at-least = 至少 { $lo } 个词。
question-words-at-most = 最多 { $hi } 个词。
question-whole = 请填整数。
question-whole-between = 请填 { $lo } 到 { $hi } 之间的整数。
question-whole-at-least = 请填不小于 { $lo } 的整数。
question-whole-at-most = 请填不大于 { $hi } 的整数。
question-number-between = 请填 { $lo } 到 { $hi } 之间的数。
question-number-at-least = 请填不小于 { $lo } 的数。
question-number-at-most = 请填不大于 { $hi } 的数。
question-rank = 请给每个选项不同的名次：1 为第一，{ $count } 为最后。

## Completion

completion-title = 谢谢
completion-no-partner = 没能及时找到对方。等待的时间也会付酬：请提交下面的完成码。
completion-mturk-submit = 向 MTurk 提交任务
completion-code = 你的完成码：
completion-no-prolific-code = 本研究没有为你的结束方式设置 Prolific 完成码。请通过 Prolific 的消息把下面的完成码发给研究人员；你会按研究说明获得报酬。
completion-return = 返回任务平台
completion-return-auto = （{ $seconds } 秒后自动返回）
completion-stay = 留在此页面

## Why a questionnaire's answer is refused, next to its question.
answer-missing = 请回答这个问题。
answer-missing-rows = 请回答每一行。
answer-missing-ranks = 请为各个选项排序。
answer-several-point = 请只选一个分值。
answer-several-option = 请只选一个选项。
answer-several-answer = 请只提交一个回答。
answer-several-number = 请只提交一个数字。
answer-several-row-point = 每一行请只选一个分值。
answer-several-rank = 每个选项请只给一个名次。
answer-point = 请选择 1 到 { $points } 之间的分值。
answer-row-point = 每一行请选择 1 到 { $points } 之间的分值。
answer-not-an-option = 请从给出的选项中选择一个。
answer-not-shown = 请只从列出的选项中选择。
answer-choose-exactly = 请恰好选择 { $count } 项。
answer-choose-between = 请选择 { $min } 到 { $max } 项。
answer-choose-at-most = 最多可以选择 { $count } 项。
answer-choose-at-least = 请至少选择 { $count } 项。
answer-too-long = 回答请不要超过 { $max } 个字符。
answer-words-between = 请写 { $min } 到 { $max } 个词（你写了 { $wrote } 个）。
answer-words-at-least = 请至少写 { $min } 个词（你写了 { $wrote } 个）。
answer-words-at-most = 最多写 { $max } 个词（你写了 { $wrote } 个）。
answer-number-between = 请输入 { $min } 到 { $max } 之间的{ $whole ->
    [yes] 整数
   *[no] 数字
}。
answer-number-at-least = 请输入不小于 { $min } 的{ $whole ->
    [yes] 整数
   *[no] 数字
}。
answer-number-at-most = 请输入不大于 { $max } 的{ $whole ->
    [yes] 整数
   *[no] 数字
}。
answer-number-any = 请输入{ $whole ->
    [yes] 整数
   *[no] 数字
}。
answer-rows-left = 请回答每一行（还剩 { $left } 行）。
answer-rank-each = 请给每个选项一个不同的名次（1 到 { $options }）。
answer-rank-all = 请给每个选项一个名次（1 到 { $options }）。

## Evaluation pages (questions, onboarding, rating, comparison)

eval-continue = 继续
eval-submit = 提交
eval-questions-title = 几个问题
eval-practice-title = 练习
eval-practice-item = 练习 { $n }
eval-conversation = 对话
eval-the-conversation = 对话
eval-conversation-side = 对话 { $side }
eval-turn-labels = 这一轮的标注
eval-compare-title = 比较两段对话
eval-compare-question = 两段对话中哪一段更好？
eval-rate-title = 为对话评分
eval-item-progress = 第 { $item } 项，最多 { $items } 项 · 请在 { $minutes } 分钟内提交
eval-skip = 跳过这一项
eval-reason-prompt = 为什么？请简要说明你的选择。
eval-ending-text = 感谢你抽出时间。
eval-no-items-title = 没有需要评判的内容了
eval-screened-title = 谢谢

## What is wrong with an evaluation form sent back

eval-problem-choice = 请在两段对话中选择一段。
eval-problem-vote = 请选择一个答案。
eval-problem-reason = 请给出理由。
eval-problem-reason-words = 请给出至少 { $min } 个词的理由。
eval-problem-reason-too-long = 请不要超过 { $max } 个字符。
eval-problem-exclusive = “{ $only }”不能与“{ $others }”同时勾选：请取消其中一个。
eval-problem-exclusive-joiner = {"”、“"}
eval-problem-tick-none = 请为这条消息至少勾选一个选项（都不适用时勾选“{ $none }”）。
eval-problem-tick = 请为这条消息至少勾选一个选项。
eval-problem-scale = 请为这条消息在量表上选择一个分值。

## Chat and arena pages

eval-chat-title = 与助手对话
eval-arena-title = 与两个助手对话
eval-chat-assistant = 助手
eval-chat-assistant-a = 助手 A
eval-chat-assistant-b = 助手 B
eval-chat-you = 你
eval-chat-reply-prompt = 这条回复怎么样？
eval-chat-feeling = 你对这条回复的感受
eval-chat-satisfied = 满意
eval-chat-frustrated = 不满意
eval-chat-typing = { $assistant }正在输入…
eval-chat-failed = { $assistant }未能回复你的上一条消息。
eval-chat-retry = 重试
eval-chat-progress = 你的消息：{ $turns } 条（至少 { $min } 条，至多 { $max } 条）
eval-chat-time-limit = 时限 { $minutes } 分钟
eval-chat-conversation-of = 第 { $n } 段对话，最多 { $max } 段
eval-chat-time-up = 本次对话的时间已到。
eval-chat-ended = 对话已结束。
eval-chat-max = 你在本次对话中发送的消息已达上限。
eval-chat-your-message = 你的消息
eval-chat-placeholder = 输入你的消息…
eval-chat-send = 发送
eval-chat-end = 结束对话
eval-arena-finish = 结束并投票
eval-arena-question = 哪个助手更好？
eval-arena-vote-left = 助手 A 更好
eval-arena-vote-right = 助手 B 更好
eval-arena-vote-tie = 平局：两个都好
eval-arena-vote-both-bad = 两个都不好
eval-chat-check-labels = 请检查上一条回复的标注。
eval-chat-refused-ended = 本次对话已结束。
eval-chat-refused-pending = 请等回复到了再继续输入。
eval-chat-refused-failed = 有助手没有回复你的上一条消息：请先点“重试”。
eval-chat-refused-empty = 请先输入消息。
eval-chat-refused-too-long = 消息请不要超过 { $max } 个字符。
eval-chat-refused-too-few = 请至少发送 { $min } 条消息后再结束对话。
eval-chat-refused-wait = 请先等待回复。
eval-chat-refused-unsent = 你的消息还没有发送：请先发送或清空输入框，再结束对话。
eval-reveal-title = 感谢你的投票
eval-reveal-chose = 你的选择：{ $choice }。
eval-reveal-side = { $assistant } 是 { $system }
eval-reveal-tie = 平局
eval-reveal-both-bad = 两个都不好
eval-reveal-void = 本次对话中有助手未能回复，因此这次投票不计入排行榜。

## The chat page's script

chat-js-not-sent = 这条消息未能发送。
chat-js-you = 你

## Refusal and error pages

error-title-bad-request = 请求有误
error-title-unauthorized = 未获授权
error-title-forbidden = 无法访问
error-title-not-found = 页面不存在
error-title-conflict = 无法继续
error-title-too-many = 请求过多
error-title-server = 服务器错误
error-not-found = 此页面不存在。
error-too-many = 短时间内从你的网络打开了太多参与链接。请等待 { $seconds } 秒后再打开你的链接：期间不会丢失任何内容。
error-store = 服务器暂时无法保存或读取你的数据。请稍后再试。
error-other-site = 此表单必须从本网站的页面提交。
error-no-participation = 请打开你收到的链接参与：此浏览器中没有你参与这项研究的记录。
error-seat-taken = 这个工作者 ID 已在另一个浏览器或任务中开始了这项研究。请在开始时使用的浏览器中、通过当时的链接继续；如果无法做到，请联系研究人员。
error-blocklisted = 这项研究不对你的工作者 ID 开放。感谢你的关注。
error-open-again = 请重新打开链接

## Turn-act labelling page (what is wrong with a label sent back is still in English)

acts-title = 标注高亮的这一轮
acts-so-far = 目前为止的对话
acts-submit = 提交标注
acts-legend = 高亮这一轮的对话行为（一个或多个）
acts-pairs = 槽位-值对（选填）
acts-pairs-how = 对于这一轮给出的每个值，请选择它的对话行为（须是上面勾选的之一）和槽位，再输入这个值或从这一轮中选一个词。
acts-act = 对话行为
acts-slot = 槽位
acts-value = 值
acts-pair-act = 第 { $n } 对的对话行为
acts-pair-slot = 第 { $n } 对的槽位
acts-pair-value = 第 { $n } 对的值
acts-not-saved = 标注没有保存：{ $problem }。
acts-list-sep = 、
acts-problem-unknown-act = “{ $act }”不是这个任务的对话行为（{ $known }）
acts-problem-no-act = 请至少勾选一个对话行为
acts-problem-act-not-ticked = 第 { $row } 对：它的对话行为“{ $act }”不在勾选的行为之中（{ $ticked }）
acts-problem-pair-no-act = 第 { $row } 对：请先在上面勾选它的对话行为
acts-problem-unknown-slot = 第 { $row } 对：槽位“{ $slot }”不是这个任务的槽位（{ $known }）
acts-problem-no-value = 第 { $row } 对：请填写槽位“{ $slot }”的值
acts-problem-too-long = 第 { $row } 对：值超过了 { $max } 个字符
acts-problem-same-pair = 第 { $row } 对：同一对填写了两次

## Self-dialog writing page (`sd-`): both sides of a conversation, USER then ASSISTANT

sd-title = 写出对话双方的话
sd-user = 用户
sd-assistant = 助手
sd-fix = 修改上一轮（{ $speaker }）
sd-fix-label = 上一轮
sd-fix-save = 保存修改
sd-next = 第 { $turn } 轮：{ $speaker }说
sd-add = 添加这一轮
sd-full = 对话已写满 { $max } 轮：请提交。
sd-count = 已写 { $turns } 轮；需要 { $min } 到 { $max } 轮。
sd-count-more = 已写 { $turns } 轮；需要 { $min } 到 { $max } 轮（还需写 { $missing } 轮才能提交）。
sd-submit = 提交对话

## What is wrong with a turn or a conversation sent back

sd-problem-turn = 第 { $n } 轮：{ $problem }。
sd-problem-empty = 这一轮是空的，请写下要说的话
sd-problem-too-long = 这一轮超过了 { $max } 个字符
sd-problem-full = 对话已写满 { $max } 轮，请提交
sd-problem-out-of-order = 现在还不能写这一轮，下一轮是第 { $next } 轮（也可以修改上一轮）
sd-problem-wrong-speaker = 这一轮应由{ $speaker }来说
sd-problem-too-few = 对话现在有 { $turns } 轮；请至少写 { $min } 轮再提交。
sd-problem-unsent = 你写的一轮还没有添加：请先添加，或清空后再提交对话。

## Span marking page (`sp-`): spans of the utterances, each with a slot name

sp-title = 标出对话中的细节
sp-characters = （{ $count } 个字符）
sp-remove = 删除
sp-none = 还没有标出任何片段。
sp-utterance = 话语
sp-characters-head = 字符位置
sp-text = 文本
sp-slot = 槽位
sp-help = 请在某句话语中选中要标出的词语；也可以给出话语编号和确切的词语（标出它们第一次出现的位置），或者给出字符位置（从 0 开始计数，不含结束位置）。
sp-words = 词语
sp-from = 起始
sp-to = 结束
sp-mark = 标出
sp-submit = 提交标注

## What is wrong with a span sent back

sp-problem-not-marked = 片段未能标出：{ $problem }。
sp-problem-number-turn = 话语编号必须是从 0 开始的整数，而不是“{ $value }”
sp-problem-number-start = 起始位置必须是从 0 开始的整数，而不是“{ $value }”
sp-problem-number-end = 结束位置必须是从 0 开始的整数，而不是“{ $value }”
sp-problem-turn = 请选择话语
sp-problem-slot = 请选择一个槽位名
sp-problem-missing = 话语 { $turn } 不存在
sp-problem-not-found = 话语 { $turn } 中没有“{ $words }”
sp-problem-offsets = 请同时给出起始和结束位置，或者给出词语
sp-problem-no-turn = 话语 { $turn } 不存在：这段对话共有 { $turns } 句话语（编号 0 到 { $last }）
sp-problem-empty = 片段 { $start }..{ $end } 是空的：结束位置必须在起始位置之后
sp-problem-past-end = 片段结束于 { $end }，超出了这句话语的末尾（共 { $len } 个字符）
sp-problem-unknown-slot = `{ $slot }` 不是这项研究的槽位名
sp-problem-text-mismatch = 这些位置选中的是“{ $found }”，而不是给出的文本（“{ $given }”）
sp-problem-remove = 没有这个要删除的片段：目前标出了 { $count } 个。
sp-problem-too-few = 目前标出了 { $count } 个片段；请至少标出 { $min } 个再提交。
sp-problem-unsent = 你有一个片段还没有标注：请先标注，或清空它的词语和位置后再提交。

## The span page's script

sp-js-hint = 在话语中选中词语即可标出它们。
sp-js-one-utterance = 请在同一句话语中选择词语。
sp-js-selected = “{ $text }”（话语 { $turn }，字符 { $start }–{ $end }）：请选择它的槽位，然后点“标出”。
