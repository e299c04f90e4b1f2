-- Argo CD health of a Volcano Job (batch.volcano.sh/v1alpha1), from the status the Volcano job controller writes:
-- volcano-sh/volcano v1.15.1, staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go (JobPhase 306-329: Pending,
-- Aborting, Aborted, Running, Restarting, Completing, Completed, Terminating, Terminated, Failed; JobState 332-349;
-- JobStatus 359-426: minAvailable, pending, running, succeeded, failed, retryCount), pkg/controllers/job/state/
-- (factory.go NewState 87-110, a phase's actions: pending.go, running.go (Completed or Failed when every pod ended,
-- by minAvailable and minSuccess), restarting.go (Failed once retryCount reaches spec.maxRetry), aborting.go,
-- aborted.go (ResumeJob restarts it), completing.go, terminating.go, finished.go), and
-- pkg/controllers/job/job_controller_actions.go (killPods 91-284 and syncJob 344-626 count the pods and set the
-- phase; initJobStatus 966-989 sets Pending). The controller writes no state.reason or state.message at v1.15.1:
-- the message is made from the phase and the pod counts (a message it writes is shown first).
-- `vcctl job suspend` is the AbortJob command and `vcctl job resume` ResumeJob (pkg/cli/job/suspend.go 60,
-- resume.go 59): Aborting and Aborted are Suspended (a policy's AbortJob action aborts the same way).
-- Terminating and Terminated (a policy's TerminateJob action: "finished unexpected") are Degraded, as Failed is.
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local st = obj.status or {}
local state = st.state or {}
local phase = state.phase or ""

local function n(value)
  return tostring(value or 0)
end

local function said()
  if state.message ~= nil and state.message ~= "" then
    return phase .. ": " .. state.message
  end
  local text = phase .. ": " .. n(st.running) .. " running, " .. n(st.pending) .. " pending, " ..
               n(st.succeeded) .. " succeeded, " .. n(st.failed) .. " failed (minAvailable " .. n(st.minAvailable) .. ")"
  if (st.retryCount or 0) > 0 then
    text = text .. ", retryCount " .. n(st.retryCount) .. " of maxRetry " .. n((obj.spec or {}).maxRetry)
  end
  return text
end

if phase == "Failed" or phase == "Terminated" or phase == "Terminating" then
  return {status = "Degraded", message = said()}
end
if phase == "Completed" then
  return {status = "Healthy", message = said()}
end
if phase == "Aborted" or phase == "Aborting" then
  return {status = "Suspended", message = said()}
end
if phase == "" then
  return {status = "Progressing", message = "Waiting for the Volcano job controller to report the job's phase"}
end
-- Pending, Running, Restarting, Completing.
return {status = "Progressing", message = said()}
