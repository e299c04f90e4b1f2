-- Argo CD health of a TrainJob (trainer.kubeflow.org/v1alpha1), from the status Kubeflow Trainer writes: kubeflow/trainer
-- v2.3.0, pkg/apis/trainer/v1alpha1/trainjob_types.go (condition types Suspended, Complete, Failed; reasons Suspended,
-- Resumed, TrainingRuntimeNotSupported, DeadlineExceeded; status.jobsStatus), pkg/constants/constants.go (messages
-- "TrainJob is suspended", "TrainJob is resumed", "TrainJob exceeded its active deadline"),
-- pkg/controller/trainjob_controller.go, and pkg/runtime/framework/plugins/jobset/jobset.go (Complete and Failed are
-- the JobSet's Completed and Failed conditions copied with their reason and message). There is no Created or Running
-- condition: a started run is told by jobsStatus.
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local function condition(ctype, cstatus)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == ctype and c.status == cstatus then
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

local failed = condition("Failed", "True")
if failed ~= nil then
  return {status = "Degraded", message = said(failed)}
end
local complete = condition("Complete", "True")
if complete ~= nil then
  return {status = "Healthy", message = said(complete)}
end
local suspended = condition("Suspended", "True")
if suspended ~= nil then
  return {status = "Suspended", message = said(suspended)}
end

-- Running: one entry per replicated job of the JobSet, counting its Jobs.
local running = ""
local any_active = false
for _, j in ipairs((obj.status or {}).jobsStatus or {}) do
  if (j.active or 0) > 0 then
    any_active = true
  end
  if running ~= "" then
    running = running .. ", "
  end
  running = running .. (j.name or "?") .. " (" .. (j.active or 0) .. " active, " .. (j.ready or 0) .. " ready, "
    .. (j.succeeded or 0) .. " succeeded, " .. (j.failed or 0) .. " failed)"
end
if any_active then
  return {status = "Progressing", message = "Running: " .. running}
end
local resumed = condition("Suspended", "False")
if resumed ~= nil then
  return {status = "Progressing", message = said(resumed)}
end
if running ~= "" then
  return {status = "Progressing", message = "Starting: " .. running}
end
return {status = "Progressing", message = "Waiting for Kubeflow Trainer to create the run's JobSet"}
