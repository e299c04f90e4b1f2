-- Argo CD health of a RayJob (ray.io/v1), from the status KubeRay writes: ray-project/kuberay v1.7.0,
-- ray-operator/apis/ray/v1/rayjob_types.go (JobStatus 17-24: "", PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED, the
-- Ray job as the Ray dashboard reports it; JobDeploymentStatus 48-59: "", Initializing, Running, Complete, Failed,
-- ValidationFailed, Suspending, Suspended, Retrying, Waiting; JobFailedReason 70-78; RayJobStatus 304-352: reason,
-- message, failed), ray-operator/controllers/ray/rayjob_controller.go (Reconcile 89-462: ValidationFailed with the
-- validation error 151-153; New to Initializing, initRayJobStatusIfNeed 887-917; Initializing waits for the RayCluster
-- to be Ready, then Waiting (InteractiveMode) or Running 179-248; Running copies the dashboard's JobStatus and message
-- and turns Complete when the Ray job and its submitter end, Failed with reason AppFailed when the Ray job FAILED
-- 249-365; Suspending and Retrying delete the cluster and clear message and reason, then Suspended or New 366-410;
-- a Suspended RayJob whose spec.suspend is false goes back to New 411-419; checkBackoffLimitAndUpdateStatusIfNeeded
-- 518-557 turns Failed into Retrying in the same status update while spec.backoffLimit allows another attempt;
-- updateStatusToSuspendingIfNeeded 1043-1060; the submitter's failure (SubmissionFailed, "Job submission has failed.
-- ...") 1062-1181; the deadlines (DeadlineExceeded, PreRunningDeadlineExceeded) 1234-1261, the submitter and
-- status-check timeouts 1263-1286 and 1336-1354, the transition grace period 1366-1394).
-- A Complete RayJob whose Ray job was STOPPED (ray job stop) did not finish its work: Degraded, as a failure.
-- Argo CD runs it without Lua's string library (resource.customizations.useOpenLibs is not set): no string methods.
local st = obj.status or {}
local deployment = st.jobDeploymentStatus or ""
local job = st.jobStatus or ""

local function said(default)
  if st.message ~= nil and st.message ~= "" then
    return st.message
  end
  if st.reason ~= nil and st.reason ~= "" then
    return st.reason
  end
  return default
end

if deployment == "Failed" or deployment == "ValidationFailed" then
  return {status = "Degraded", message = said("RayJob " .. deployment)}
end
if deployment == "Complete" then
  if job == "SUCCEEDED" then
    return {status = "Healthy", message = said("Ray job SUCCEEDED")}
  end
  return {status = "Degraded", message = said("Ray job " .. job)}
end
if deployment == "Suspended" then
  return {status = "Suspended", message = "RayJob is suspended (spec.suspend): its RayCluster is deleted"}
end
if deployment == "Suspending" then
  return {status = "Suspended", message = "RayJob is suspending (spec.suspend): deleting its RayCluster and submitter"}
end
if deployment == "Retrying" then
  local failed = st.failed or 0
  return {status = "Progressing", message = "Retrying after failed attempt " .. tostring(failed) .. ": " ..
                                            said("RayJob Failed")}
end
if deployment == "Initializing" then
  local cluster = st.rayClusterName or ""
  local state = (st.rayClusterStatus or {}).state
  local message = "Initializing: waiting for RayCluster " .. cluster .. " to be ready"
  if state ~= nil and state ~= "" then
    message = message .. " (state " .. state .. ")"
  end
  return {status = "Progressing", message = message}
end
if deployment == "Waiting" then
  return {status = "Progressing", message = "Waiting: the RayCluster is ready; InteractiveMode waits for spec.jobId"}
end
if deployment == "Running" then
  if job == "" then
    return {status = "Progressing", message = "Running: the Ray job is submitted, the dashboard has not reported it yet"}
  end
  if st.message ~= nil and st.message ~= "" then
    return {status = "Progressing", message = "Ray job " .. job .. ": " .. st.message}
  end
  return {status = "Progressing", message = "Ray job " .. job}
end
if deployment == "" then
  return {status = "Progressing", message = "Waiting for KubeRay to report the RayJob's status"}
end
return {status = "Progressing", message = "RayJob " .. deployment}
