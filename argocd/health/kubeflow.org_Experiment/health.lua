-- Argo CD health of a Katib Experiment (kubeflow.org/v1beta1), from the conditions the Katib controller writes:
-- kubeflow/katib v0.19.0, pkg/apis/controller/experiments/v1beta1/experiment_types.go (ExperimentStatus 66-141: the
-- trial counts; ExperimentCondition 158-176; condition types 179-187: Created, Running, Restarting, Succeeded,
-- Failed), pkg/apis/controller/experiments/v1beta1/util.go (setCondition 112-128; Succeeded and Failed turn Running
-- False 145-160; Restarting removes Succeeded and Failed 139-143), pkg/controller.v1beta1/experiment/util/status_util.go
-- (reasons 34-42; UpdateExperimentStatusCondition 186-235: Succeeded when the objective goal, maxTrialCount or the
-- suggestion's end is reached, Failed when maxFailedTrialCount is, else Running "Experiment is running") and
-- pkg/controller.v1beta1/experiment/experiment_controller.go (Reconcile 168-259: Created "Experiment is created",
-- Restarting "Experiment is restarted" when a finished experiment gets a larger maxTrialCount; ReconcileSuggestions
-- 457, at 482-484: Failed "Suggestion has failed").
-- An Experiment has no suspend: Katib v0.19.0's ExperimentSpec has no such field, so it never shows Suspended.
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local st = obj.status or {}

local function true_condition(ctype)
  for _, c in ipairs(st.conditions or {}) do
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

local function n(value)
  return tostring(value or 0)
end

local trials = " (trials: " .. n(st.trialsRunning) .. " running, " .. n(st.trialsPending) .. " pending, " ..
               n(st.trialsSucceeded) .. " succeeded, " .. n(st.trialsFailed) .. " failed)"

local failed = true_condition("Failed")
if failed ~= nil then
  return {status = "Degraded", message = said(failed) .. trials}
end
local succeeded = true_condition("Succeeded")
if succeeded ~= nil then
  return {status = "Healthy", message = said(succeeded) .. trials}
end
for _, ctype in ipairs({"Running", "Restarting", "Created"}) do
  local c = true_condition(ctype)
  if c ~= nil then
    return {status = "Progressing", message = said(c) .. trials}
  end
end
return {status = "Progressing", message = "Waiting for the Katib controller to report the experiment's status"}
