-- Argo CD health of an MPIJob, for both controllers that own the kind kubeflow.org/MPIJob: the training operator's
-- kubeflow.org/v1 (kubeflow/trainer v1.9.4, pkg/apis/kubeflow.org/v1/common_types.go, pkg/util/status.go,
-- pkg/controller.v1/mpi/mpijob_controller.go) and the MPI Operator's kubeflow.org/v2beta1 (kubeflow/mpi-operator
-- v0.8.0, pkg/apis/kubeflow/v2beta1/types.go, pkg/controller/mpi_job_controller.go and
-- mpi_job_controller_status.go). Both write the same condition types (Created, Running, Restarting, Succeeded,
-- Suspended, Failed); the reasons and messages differ (v2beta1 copies the launcher Job's failure, e.g.
-- "BackoffLimitExceeded/Error"). Argo CD keys health by group and kind, not version, so one script serves both.
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
return {status = "Progressing", message = "Waiting for the MPI Operator (or the training operator) to report the job's status"}
