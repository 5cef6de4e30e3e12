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
