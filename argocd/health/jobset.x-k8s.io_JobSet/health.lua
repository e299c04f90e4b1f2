-- Argo CD health of a JobSet (jobset.x-k8s.io/v1alpha2), from the status the JobSet controller writes:
-- kubernetes-sigs/jobset v0.12.0, api/jobset/v1alpha2/jobset_types.go (condition types Completed, Failed, Suspended,
-- RestartingJobSet, StartupPolicyInProgress, StartupPolicyCompleted; status.terminalState, restarts,
-- replicatedJobsStatus), pkg/constants/constants.go (reasons and messages), pkg/controllers/jobset_controller.go and
-- pkg/controllers/failure_policy.go (a failure message names the first failed Job).
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local function condition(ctype)
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

local status = obj.status or {}
local failed = condition("Failed")
if failed ~= nil then
  return {status = "Degraded", message = said(failed)}
end
if status.terminalState == "Failed" then
  return {status = "Degraded", message = "JobSet failed"}
end
local completed = condition("Completed")
if completed ~= nil then
  return {status = "Healthy", message = said(completed)}
end
if status.terminalState == "Completed" then
  return {status = "Healthy", message = "JobSet completed"}
end
local suspended = condition("Suspended")
if suspended ~= nil then
  return {status = "Suspended", message = said(suspended)}
end
local restarting = condition("RestartingJobSet")
if restarting ~= nil then
  return {status = "Progressing", message = said(restarting) .. " (restarts: " .. (status.restarts or 0) .. ")"}
end
local startup = condition("StartupPolicyInProgress")
if startup ~= nil then
  return {status = "Progressing", message = said(startup)}
end

-- Running: one entry per replicated job, counting its Jobs.
local running = ""
for _, j in ipairs(status.replicatedJobsStatus or {}) do
  if running ~= "" then
    running = running .. ", "
  end
  running = running .. (j.name or "?") .. " (" .. (j.active or 0) .. " active, " .. (j.ready or 0) .. " ready, "
    .. (j.succeeded or 0) .. " succeeded, " .. (j.failed or 0) .. " failed)"
end
if running ~= "" then
  return {status = "Progressing", message = "Running: " .. running}
end
return {status = "Progressing", message = "Waiting for the JobSet controller to create the Jobs"}
