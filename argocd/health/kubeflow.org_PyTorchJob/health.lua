-- Argo CD health of a PyTorchJob (kubeflow.org/v1), from the conditions the training operator writes: kubeflow/trainer
-- v1.9.4 (the training-operator line), pkg/apis/kubeflow.org/v1/common_types.go (JobConditionType: Created, Running,
-- Restarting, Succeeded, Suspended, Failed), pkg/util/status.go (reasons "<Kind><Reason>"; a Failed job keeps its
-- conditions; Running and Restarting replace each other; Running turns False on Succeeded or Failed),
-- pkg/controller.v1/pytorch/pytorchjob_controller.go and pkg/controller.v1/common/job.go (the messages).
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local function true_condition(ctype)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == ctype and c.status == "True" then
      return c
    end
  end
  return nil
end

local function said(c)
  if c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return c.reason or c.type
end

local failed = true_condition("Failed")
if failed ~= nil then
  return {status = "Degraded", message = said(failed)}
end
local succeeded = true_condition("Succeeded")
if succeeded ~= nil then
  return {status = "Healthy", message = said(succeeded)}
end
local suspended = true_condition("Suspended")
if suspended ~= nil then
  return {status = "Suspended", message = said(suspended)}
end
for _, ctype in ipairs({"Restarting", "Running"}) do
  local c = true_condition(ctype)
  if c ~= nil then
    return {status = "Progressing", message = said(c)}
  end
end
-- Resumed and not yet running again: the Suspended condition turned False ("<Kind> <name> is resumed.").
for _, c in ipairs((obj.status or {}).conditions or {}) do
  if c.type == "Suspended" and c.status == "False" then
    return {status = "Progressing", message = said(c)}
  end
end
local created = true_condition("Created")
if created ~= nil then
  return {status = "Progressing", message = said(created)}
end
return {status = "Progressing", message = "Waiting for the training operator to report the job's status"}
